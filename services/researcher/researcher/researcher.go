// Package researcher is the researcher service: locates each leased clip's occurrences inside the episode's audio.
package researcher

import "github.com/archivist/archivist/pkg/service"

// Definition is the researcher service. Its feature is not built yet; see the
// open issues and docs/researcher.md.
func Definition() service.Definition {
	return service.Planned("researcher", "locates each leased clip's occurrences inside the episode's audio",
		"take work items, check their deadline, fetch audio from the blob store",
		"fingerprint clips, stream the episode through them, publish one completed-research event per clip",
	)
}
