package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestDeletingABatchLeavesJobsAtWorkAlone: deleting a failed batch marked
// every job deleted, whatever its state, against the table and under the
// worker holding a requeued one. Now the delete is refused (409, naming the
// job) while a job is at work, and goes through once it has ended.
func TestDeletingABatchLeavesJobsAtWorkAlone(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	murl, files := o.manifest("del", 2)
	o.mu.Lock()
	delete(o.files, "/files/del-001.txt")
	o.mu.Unlock()
	id := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	r.waitState(ingest.Batch, id, ingest.Failed, 60*time.Second)
	var job int64
	r.db.QueryRow(context.Background(), `SELECT id FROM curator.jobs WHERE batch_id = $1 AND state = 'failed'`, id).Scan(&job)
	gate := make(chan struct{})
	o.mu.Lock()
	o.files["/files/del-001.txt"] = files["del-001.txt"]
	o.hang["/files/del-001.txt"] = gate
	o.mu.Unlock()
	if code, out := r.call("POST", fmt.Sprintf("/v1/jobs/%d/requeue", job), nil); code != http.StatusOK {
		t.Fatalf("requeue: %d %v", code, out)
	}
	r.waitState(ingest.Job, job, ingest.Downloading, 30*time.Second)
	code, out := r.call("POST", fmt.Sprintf("/v1/batches/%d/delete", id), nil)
	if msg, _ := out["error"].(string); code != http.StatusConflict || !strings.Contains(msg, fmt.Sprintf("job %d is downloading", job)) {
		t.Errorf("delete with a job downloading: %d %v, want 409 naming the job", code, out)
	}
	close(gate)
	r.waitState(ingest.Job, job, ingest.Completed, 30*time.Second)
	if code, out := r.call("POST", fmt.Sprintf("/v1/batches/%d/delete", id), nil); code != http.StatusOK {
		t.Fatalf("delete once the job ended: %d %v", code, out)
	}
	var left int
	r.db.QueryRow(context.Background(), `SELECT count(*) FROM curator.jobs WHERE batch_id = $1 AND state <> 'deleted'`, id).Scan(&left)
	if left != 0 {
		t.Errorf("%d jobs of the deleted batch not deleted", left)
	}
}
