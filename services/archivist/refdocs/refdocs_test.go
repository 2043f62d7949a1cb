package refdocs_test

import (
	"strings"
	"testing"

	"github.com/archivist/archivist/services/archivist/refdocs"
)

// TestReferenceTablesAreCurrent: every generated table of the README and
// the docs is what the code says now.
func TestReferenceTablesAreCurrent(t *testing.T) {
	stale, err := refdocs.Update("../../..", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Fatalf("generated tables are stale in %s: run go generate ./services/archivist/refdocs", strings.Join(stale, ", "))
	}
}

// TestTablesSayWhatTheCodeDefines: each table has a row for every item
// its source defines (a stream, a consumer, a transition, an outcome row).
func TestTablesSayWhatTheCodeDefines(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		want []string
	}{
		{"streams", refdocs.Streams(), []string{"`REJECTED`", "`RESEARCH_RETIRED`", "`DEADLETTER`", "`INDEX_READY`"}},
		{"consumers", refdocs.Consumers(), []string{"| curator |", "| auditor |", "| indexer |"}},
		{"transitions", refdocs.Transitions(), []string{"| job | failed | notify | admin | `requeue` |", "| batch | processing | reporting | auto |"}},
		{"outcomes", refdocs.Outcomes(), []string{"| 1 |", "| 11 |"}},
		{"metrics", refdocs.Metrics("../../.."), []string{
			"| `archivist_research_open_episodes` | gauge |",                       // a name from a constant of events
			"| `archivist_bus_messages_total` | counter | `consumer`, `outcome` |", // a Vec's labels
			"| `archivist_consumer_pending` | gauge | `stream`, `consumer` |",      // a service.Gauge, labels by variable
			"| `archivist_db_pool_connections` | gauge | `state` |",                // a collector's Desc
			"| `archivist_aggregator_announcements_refused_total` | counter |",
			"| `archivist_http_request_duration_seconds` | histogram |"}},
		{"variables", refdocs.Variables("../../.."), []string{"| cwa | NATS, PostgreSQL | `RESEARCH_LEASE_DURATION`", "`DASHBOARD_CURATOR_URL`", "| every service | `ADMIN_ADDR`"}},
		{"routes", refdocs.Routes("../../.."), []string{"| curator | POST | `/v1/batches` |", "| pwa | GET | `/v1/work` |", "| aggregator | GET | `/cdx` |"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.text, w) {
				t.Errorf("%s table lacks %q:\n%s", c.name, w, c.text)
			}
		}
	}
}
