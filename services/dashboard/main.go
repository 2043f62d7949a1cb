// Command dashboard serves the operator's dashboard: the five pipelines of
// Archivist on one page, live, behind the APIs' authentication. See
// docs/dashboard.md.
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/dashboard/dashboard"
)

func main() { service.Main(dashboard.Definition()) }
