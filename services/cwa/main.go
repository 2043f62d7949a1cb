// Command cwa runs the cwa service: stores research results, extends leases, and revokes them on the final item. See docs/research.md ("cwa").
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/cwa/cwa"
)

func main() { service.Main(cwa.Definition()) }
