// Command researcher runs the researcher service: locates each leased clip's occurrences inside the episode's audio. See docs/researcher.md.
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/researcher/researcher"
)

func main() { service.Main(researcher.Definition()) }
