package auditor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestAuditQueueOnOneConnection: the audit queue is worked on a pool of a
// single connection. It used to hold its entry's transaction while the
// capture took more connections from the same pool: with the pool's last
// connection in that transaction (the leaders' sessions held the others,
// in the fault soak), the capture waited for a connection that only it
// could free, and every consumer's dependency probe starved with it.
func TestAuditQueueOnOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(testenv.DBURL(t, migrations.Schema))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"objects/a", "objects/b", "objects/c"} {
		if _, err := bs.Put(ctx, k, strings.NewReader(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	a := auditor.New(testenv.Bus(t, "auditor"), db, bs, nil, auditor.Config{Cycle: 720 * time.Hour, MaxOnDemand: 100, ReconcilePrefix: "objects/"}, testenv.Logger(t))
	r, err := a.Reconcile(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.Unrecorded != 3 {
		t.Fatalf("reconciliation found %d unrecorded objects, want 3", r.Unrecorded)
	}
	n, err := a.ProcessAuditQueue(ctx, 10)
	if err != nil || n != 3 {
		t.Fatalf("audit queue on one connection: %d entries worked (%v), want 3", n, err)
	}
	var indexed, done int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM auditor.content_index), (SELECT count(*) FROM auditor.audit_queue WHERE done)`).Scan(&indexed, &done); err != nil {
		t.Fatal(err)
	}
	if indexed != 3 || done != 3 {
		t.Errorf("after the queue: %d objects in the content index, %d entries done; want 3 and 3", indexed, done)
	}
}
