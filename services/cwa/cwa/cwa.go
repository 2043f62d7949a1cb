// Package cwa is the cwa service: stores research results, extends leases, and revokes them on the final item.
package cwa

import "github.com/archivist/archivist/pkg/service"

// Definition is the cwa service. Its feature is not built yet; see the
// open issues and docs/cwa.md.
func Definition() service.Definition {
	return service.Planned("cwa", "stores research results, extends leases, and revokes them on the final item",
		"consume completed-research events and store each clip's occurrences",
		"extend the lease on each result and revoke it on the final one",
	)
}
