// Command indexer runs the indexer service: indexes every ARC/WARC file into CDX, one file per task. See docs/indexing.md ("indexer service").
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/indexer/indexer"
)

func main() { service.Main(indexer.Definition()) }
