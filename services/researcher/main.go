// Command researcher runs the researcher service: it takes leased work
// items and locates each clip in the episode's audio. See docs/research.md.
//
// No clip locator is built in yet (the clip-locator issue): the binary
// starts, reports ready, and takes no work.
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/researcher/researcher"
)

func main() { service.Main(researcher.Definition(nil)) }
