package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestClaimsAreBoundedOverAllStates: each claim holds a PostgreSQL
// connection, and 11 daemons of INGEST_CONCURRENCY (8) each could hold 88.
// With INGEST_MAX_CLAIMS=3 and 12 jobs whose downloads hang, at most 3
// claims are ever held, and the batch completes once the origin answers.
func TestClaimsAreBoundedOverAllStates(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_MAX_CLAIMS": "3"})
	murl, _ := o.manifest("claims", 12)
	gate := make(chan struct{})
	o.mu.Lock()
	for i := range 12 {
		o.hang[fmt.Sprintf("/files/claims-%03d.txt", i)] = gate
	}
	o.mu.Unlock()
	id := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	most := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		// The claims' locks, not the leader's of the curator's singleton
		// loops (service.AsLeader).
		r.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND objid::bigint <> (hashtext('archivist.leader.curator.reconcile')::bigint & 4294967295)`).Scan(&n)
		most = max(most, n)
	}
	close(gate)
	r.waitState(ingest.Batch, id, ingest.Completed, 60*time.Second)
	if most == 0 || most > 3 {
		t.Errorf("at most %d claims held at once, want 1 to 3 (INGEST_MAX_CLAIMS)", most)
	}
}
