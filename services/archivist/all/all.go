// Package all lists every Archivist service, in start order.
package all

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/curator/curator"
	"github.com/archivist/archivist/services/cwa/cwa"
	"github.com/archivist/archivist/services/dashboard/dashboard"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/pwa/pwa"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// Services returns every service's definition in start order: producers of
// state first, so that consumers find their streams populated.
func Services() []service.Definition {
	return []service.Definition{
		curator.Definition(),
		pwa.Definition(),
		cwa.Definition(),
		researcher.Definition(locate.NewLocator()),
		indexer.Definition(),
		aggregator.Definition(),
		auditor.Definition(),
		dashboard.Definition(),
	}
}
