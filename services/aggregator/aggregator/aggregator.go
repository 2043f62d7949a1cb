// Package aggregator is the aggregator service: sorts and merges CDX outputs into the index a Wayback replays from, and serves CDX queries.
package aggregator

import "github.com/archivist/archivist/pkg/service"

// Definition is the aggregator service. Its feature is not built yet; see the
// open issues and docs/aggregator.md.
func Definition() service.Definition {
	return service.Planned("aggregator", "sorts and merges CDX outputs into the index a Wayback replays from, and serves CDX queries",
		"consume index.cdx.ready and merge outputs into a new index generation",
		"serve the CDX query API",
	)
}
