// Command researcher runs the researcher service: it takes leased work
// items and locates each clip in the episode's audio with the acoustic
// fingerprint matcher of package locate. See docs/research.md.
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/researcher"
)

func main() { service.Main(researcher.Definition(locate.NewLocator())) }
