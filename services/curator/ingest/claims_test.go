package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestClaimsAreBoundedOverAllStates: each claim holds a PostgreSQL
// connection, and 11 daemons of INGEST_CONCURRENCY each could hold 11 times
// that. With INGEST_MAX_CLAIMS=12 and 12 jobs whose downloads hang, at
// most 12 shared claims and one of each state's own are ever held, and no
// state starves: the downloads hold every shared slot, and a second batch
// goes through every state up to downloading meanwhile on the states' own
// slots (with 12 shared slots alone it never left pending); both complete
// once the origin answers.
func TestClaimsAreBoundedOverAllStates(t *testing.T) {
	o := newOrigin(t)
	// 12 shared claim slots, and one of each of the 11 states' own.
	r := newRig(t, map[string]string{"INGEST_MAX_CLAIMS": "12", "INGEST_CONCURRENCY": "12"})
	ctx := context.Background()
	murl, _ := o.manifest("claims", 12)
	gate := make(chan struct{})
	o.mu.Lock()
	for i := range 12 {
		o.hang[fmt.Sprintf("/files/claims-%03d.txt", i)] = gate
	}
	o.mu.Unlock()
	id := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	claims := func() int {
		var n int
		// The claims' locks, not the leader's of the curator's singleton
		// loops (service.Env.AsLeader, pkg/leader).
		r.db.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND objid::bigint <> (hashtext('archivist.leader.curator.reconcile')::bigint & 4294967295)`).Scan(&n)
		return n
	}
	downloading := func() int {
		var n int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE batch_id = $1 AND state = 'downloading'`, id).Scan(&n)
		return n
	}
	// Every job of the batch waits in downloading, and downloads hang (the
	// manifest was read twice: two GETs before them).
	for deadline := time.Now().Add(20 * time.Second); downloading() < 12 || o.gets.Load() < 4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs downloading, %d GETs: the downloads did not start", downloading(), o.gets.Load())
		}
	}
	// While every download hangs, holding every shared slot, a second
	// batch goes through every state up to downloading on the states' own.
	other, _ := o.manifest("other", 1)
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: other, Type: "batch-manifest"})
	most := 0
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		most = max(most, claims())
		if jobs := r.jobsOf(b); len(jobs) == 1 && r.state(ingest.Job, jobs[0]) == ingest.Downloading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second batch is %s while the first one's downloads hang: a state starved", r.state(ingest.Batch, b))
		}
	}
	stuck := downloading()
	close(gate)
	r.waitState(ingest.Batch, id, ingest.Completed, 60*time.Second)
	r.waitState(ingest.Batch, b, ingest.Completed, 60*time.Second)
	if most == 0 || most > 12+11 {
		t.Errorf("at most %d claims held at once, want 1 to 23 (INGEST_MAX_CLAIMS and one a state)", most)
	}
	if stuck != 12 {
		t.Errorf("%d of the first batch's jobs were downloading meanwhile, want 12", stuck)
	}
}
