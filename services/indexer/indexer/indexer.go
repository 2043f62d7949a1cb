// Package indexer is the indexer service: indexes every ARC/WARC file into CDX, one file per task.
package indexer

import "github.com/archivist/archivist/pkg/service"

// Definition is the indexer service. Its feature is not built yet; see the
// open issues and docs/indexer.md.
func Definition() service.Definition {
	return service.Planned("indexer", "indexes every ARC/WARC file into CDX, one file per task",
		"keep a registry of archive files from archive.object.recorded and a repository poll",
		"index each file to CDX with retries and a bad-reputation rule; publish index.cdx.ready",
	)
}
