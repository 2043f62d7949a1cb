package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestLostClaimDoesNotWorkBesideItsNewHolder: after a PostgreSQL failover a
// worker's advisory lock is gone with its session while its download goes
// on, and another worker claims the job. The first wrote its download in
// place into the directory both work in; now its download, under a name of
// its own, is dropped when it finds the claim moved on (the epoch), and
// only the new holder's work completes the job.
func TestLostClaimDoesNotWorkBesideItsNewHolder(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	body := []byte(strings.Repeat("fenced download ", 1000))
	u := o.put("/fence/a.txt", body)
	gate := make(chan struct{})
	o.mu.Lock()
	o.hang["/fence/a.txt"] = gate
	o.mu.Unlock()
	manifest := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n" + u + " | a.txt | fence-1\n#%eof\n"
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/fence.checkm", []byte(manifest)), Type: "batch-manifest"})
	var job int64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if jobs := r.jobsOf(b); len(jobs) == 1 && o.gets.Load() >= 1 && r.state(ingest.Job, jobs[0]) == ingest.Downloading {
			job = jobs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's download did not start")
		}
	}
	// The failover: the claim's session ends, and its lock with it...
	var pid int
	if err := r.db.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = $1 AND granted`, job).Scan(&pid); err != nil {
		t.Fatalf("the claim's lock: %v", err)
	}
	if _, err := r.db.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	// ...and another worker (here the test) claims the job.
	holder, err := r.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, job); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `UPDATE curator.jobs SET claim_epoch = claim_epoch + 1 WHERE id = $1`, job); err != nil {
		t.Fatal(err)
	}
	close(gate) // the first worker's download arrives
	for deadline := time.Now().Add(10 * time.Second); o.served.Load() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the download was not served")
		}
	}
	dst := filepath.Join(r.env["INGEST_WORK_DIR"], fmt.Sprintf("job-%d", job), "payload", "a.txt")
	time.Sleep(time.Second) // the first worker ends its attempt
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("the worker that lost its claim put its download in place beside the new holder: %v", err)
	}
	parts, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".a.txt.part-*"))
	if len(parts) > 0 {
		t.Errorf("left behind: %v", parts)
	}
	if s := r.state(ingest.Job, job); s != ingest.Downloading {
		t.Errorf("the job moved to %s under a lost claim", s)
	}
	// The new holder lets go; a worker claims the job and completes it.
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, job); err != nil {
		t.Fatal(err)
	}
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	var moves int
	r.db.QueryRow(ctx, `SELECT count(*) FROM curator.ingest_history WHERE entity = 'job' AND entity_id = $1 AND from_state = 'downloading'`, job).Scan(&moves)
	if moves != 1 {
		t.Errorf("%d moves out of downloading, want 1", moves)
	}
}
