// Command aggregator runs the aggregator service: sorts and merges CDX outputs into the index a Wayback replays from, and serves CDX queries. See docs/indexing.md ("The aggregator service").
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/aggregator/aggregator"
)

func main() { service.Main(aggregator.Definition()) }
