// Command curator runs the curator service: curation events in, versioned
// episodes and clips out. See docs/curator.md.
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/curator/curator"
)

func main() { service.Main(curator.Definition()) }
