package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestWorkingAreaIsTidied: a job's directory was removed only by notify,
// so failed and deleted jobs kept their payload on the shared volume for
// ever (and provisioning then waited for ever), and old batches were
// cleaned up only when an operator asked. Now a failed job's directory is
// removed (and a requeue that needs the payload fetches it again, and
// completes), and a completed batch past INGEST_RETENTION is deleted.
func TestWorkingAreaIsTidied(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_TIDY_INTERVAL": "100ms", "INGEST_RETENTION": "720h"})
	ctx := context.Background()
	work := r.env["INGEST_WORK_DIR"]

	// A container that is no zip: downloaded, then failed at processing.
	u := o.put("/broken.zip", []byte("this is not a zip file"))
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: u, Type: "container"})
	r.waitState(ingest.Batch, b, ingest.Failed, 30*time.Second)
	job := r.jobsOf(b)[0]
	dir := filepath.Join(work, fmt.Sprintf("job-%d", job))
	var last string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := os.Stat(dir)
		r.db.QueryRow(ctx, `SELECT last_successful FROM curator.jobs WHERE id = $1`, job).Scan(&last)
		if os.IsNotExist(err) && last == "provisioning" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed job's directory: %v; last successful state %q (want it gone, and the job to restart from downloading)", err, last)
		}
	}
	// The depositor fixes the container; the operator requeues the job,
	// which fetches the payload again and completes.
	o.put("/broken.zip", zipOf(t, map[string][]byte{"a.txt": []byte("fixed")}))
	if code, body := r.call(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/requeue", job), nil); code != http.StatusOK {
		t.Fatalf("requeue: %d %v", code, body)
	}
	r.waitState(ingest.Job, job, ingest.Completed, 30*time.Second)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the completed job's directory: %v, want it gone", err)
	}

	// A completed batch past the retention is cleaned up without anyone
	// asking; a recent one is kept.
	murl, _ := o.manifest("kept", 1)
	old := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	recent := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	r.waitState(ingest.Batch, old, ingest.Completed, 30*time.Second)
	r.waitState(ingest.Batch, recent, ingest.Completed, 30*time.Second)
	if _, err := r.db.Exec(ctx, `UPDATE curator.batches SET state_at = now() - interval '31 days' WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	r.waitState(ingest.Batch, old, ingest.Deleted, 10*time.Second)
	if s := r.state(ingest.Batch, recent); s != ingest.Completed {
		t.Errorf("a batch within its retention is %s, want completed", s)
	}
}
