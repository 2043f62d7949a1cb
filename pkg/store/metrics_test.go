package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/store"
)

// TestPoolStatistics: the pool's collector reports its connections by
// state against its maximum and counts acquires, read at each scrape.
func TestPoolStatistics(t *testing.T) {
	ctx := context.Background()
	pool, err := store.Open(ctx, store.Config{URL: testenv.DBURL(t), MaxConns: 3}, "stats")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(store.NewPoolCollector(pool))
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP archivist_db_pool_connections Connections of the PostgreSQL pool, by state (acquired, idle, constructing).
# TYPE archivist_db_pool_connections gauge
archivist_db_pool_connections{state="acquired"} 1
archivist_db_pool_connections{state="constructing"} 0
archivist_db_pool_connections{state="idle"} 0
# HELP archivist_db_pool_max_connections The PostgreSQL pool's maximum (DATABASE_MAX_CONNS).
# TYPE archivist_db_pool_max_connections gauge
archivist_db_pool_max_connections 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "archivist_db_pool_connections", "archivist_db_pool_max_connections"); err != nil {
		t.Error(err)
	}
	held.Release()
	before := pool.Stat().AcquireCount()
	for range 5 {
		if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "archivist_db_pool_acquires_total" {
			if got := mf.GetMetric()[0].GetCounter().GetValue(); got < float64(before+5) {
				t.Errorf("acquires: %v, want at least %d", got, before+5)
			}
			return
		}
	}
	t.Error("no archivist_db_pool_acquires_total")
}
