// Command pwa runs the pwa service: leases an episode and up to N clips to researchers through a pending-work queue whose items expire before their lease. See docs/research.md ("pwa").
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/pwa/pwa"
)

func main() { service.Main(pwa.Definition()) }
