package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestKilledWorkerLosesNothing runs the curator as a process and kills it
// with SIGKILL while one job is downloading and the others wait on their
// callbacks (ARKs minted, inventory written). The claims die with the
// process's connections; a second curator takes every job up at once and
// finishes it: one ARK, one version and one announcement per file for
// each object.
func TestKilledWorkerLosesNothing(t *testing.T) {
	o := newOrigin(t)
	blobDir := t.TempDir()
	bs, err := blob.NewLocal(blobDir)
	if err != nil {
		t.Fatal(err)
	}
	shared := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	db, err := store.Open(context.Background(), store.Config{URL: shared.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var open atomic.Bool
	gate := make(chan struct{})
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !open.Load() {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer cb.Close()
	port := testenv.FreePort(t)
	env := map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "INGEST_ALLOW_PRIVATE": "true",
		"INGEST_INTERVAL": "100ms", "INGEST_MIN_FREE_BYTES": "1048576", "INGEST_WORK_DIR": t.TempDir()}
	murl, _ := o.manifest("kill", 5)
	dl := make(chan struct{})
	o.mu.Lock()
	o.hang["/files/kill-004.txt"] = dl
	o.mu.Unlock()

	const pkg = "github.com/archivist/archivist/services/curator"
	a := testenv.StartProcess(t, pkg, shared, blobDir, env)
	r := &rig{t: t, api: fmt.Sprintf("http://127.0.0.1:%d", port), db: db}
	id := r.submit(ingest.Submission{Submitter: "t", Profile: "k", PayloadURL: murl, Type: "batch-manifest", CallbackURL: cb.URL})
	count := func(state string) int {
		var n int
		db.QueryRow(context.Background(), "SELECT count(*) FROM curator.jobs WHERE state = $1", state).Scan(&n)
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); count("notify") < 4 || count("downloading") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("jobs never reached notify (4) and downloading (1): %d, %d", count("notify"), count("downloading"))
		}
	}
	a.Kill()
	// The claims go with the dead process's connections (PostgreSQL notices
	// the closed sockets at once; allow it a moment).
	locks := -1
	for deadline := time.Now().Add(2 * time.Second); locks != 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		db.QueryRow(context.Background(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").Scan(&locks)
	}
	open.Store(true)
	close(gate)
	close(dl)
	testenv.StartProcess(t, pkg, shared, blobDir, env)
	r.waitState(ingest.Batch, id, ingest.Completed, 30*time.Second)
	if locks != 0 {
		t.Errorf("%d advisory locks outlived the killed worker", locks)
	}
	var arks, objects, versions int
	db.QueryRow(context.Background(), "SELECT count(*) FROM curator.arks").Scan(&arks)
	db.QueryRow(context.Background(), "SELECT count(*) FROM curator.inventory_objects").Scan(&objects)
	db.QueryRow(context.Background(), "SELECT count(*) FROM curator.inventory_versions").Scan(&versions)
	if arks != 5 || objects != 5 || versions != 5 {
		t.Errorf("%d ARKs, %d objects, %d versions: want 5 each", arks, objects, versions)
	}
	b := testenv.BusAt(t, shared.NATSURL, "test")
	s, err := b.JetStream().Stream(context.Background(), events.StreamArchive)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(context.Background()); info.State.Msgs != 20 {
		t.Errorf("%d objects announced, want 20 (5 objects x 4 files)", info.State.Msgs)
	}
	var hist []string
	rows, _ := db.Query(context.Background(), "SELECT from_state || '>' || to_state FROM curator.ingest_history WHERE entity = 'job' AND entity_id = (SELECT max(id) FROM curator.jobs) ORDER BY id")
	for rows.Next() {
		var h string
		rows.Scan(&h)
		hist = append(hist, h)
	}
	rows.Close()
	if strings.Count(strings.Join(hist, ","), "downloading>processing") != 1 {
		t.Errorf("history of the job killed mid-download: %v", hist)
	}
}

// TestBatchDoneAfterItsLastJobsWorkerDied: a job's end commits before its
// batch is checked; if the worker dies in between, the batch reporting
// daemon's sweep finds the batch done and reports it.
func TestBatchDoneAfterItsLastJobsWorkerDied(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	batch := ingesttest.NewBatch(t, r.db, ingesttest.Batch{Submitter: "t", Profile: "crash"})
	// Its only job ended (as a worker's move left it) and nobody checked.
	ingesttest.NewJob(t, r.db, ingesttest.Job{Batch: batch, Profile: "crash", State: "completed", LastSuccessful: "notify"})
	r.waitState(ingest.Batch, batch, ingest.Completed, 20*time.Second)
	var by string
	if err := r.db.QueryRow(ctx, `SELECT by FROM curator.ingest_history WHERE entity = 'batch' AND entity_id = $1 AND to_state = 'reporting'`, batch).Scan(&by); err != nil || by != "auto" {
		t.Errorf("batch's move to reporting: by %q, %v", by, err)
	}
}
