// Package pwa is the pwa service: leases an episode and up to N clips to researchers through a pending-work queue whose items expire before their lease.
package pwa

import "github.com/archivist/archivist/pkg/service"

// Definition is the pwa service. Its feature is not built yet; see the
// open issues and docs/pwa.md.
func Definition() service.Definition {
	return service.Planned("pwa", "leases an episode and up to N clips to researchers through a pending-work queue whose items expire before their lease",
		"consume curated episodes and clips into the research schema",
		"run the capacity check on a timer and on events, and lease work in the same transaction as the selection",
		"publish work items with a TTL shorter than the lease; free the clips of expired leases",
	)
}
