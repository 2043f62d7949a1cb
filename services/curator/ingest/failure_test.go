package ingest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
)

// TestOriginDownForLongerThanItsAttempts: an origin answering 500 for more
// attempts than INGEST_MAX_ATTEMPTS, but within INGEST_RETRY_BUDGET, used
// to fail its job (and the batch reported "failed" to the depositor) in
// seconds; the job now backs off and completes once the origin answers.
func TestOriginDownForLongerThanItsAttempts(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_MAX_ATTEMPTS": "2", "INGEST_RETRY_BUDGET": "1h", "INGEST_RETRY_MAX": "200ms"})
	u := o.put("/down.txt", []byte("eventually"))
	o.mu.Lock()
	o.fail["/down.txt"] = 12 // 2 tries an attempt: 6 attempts fail
	o.mu.Unlock()
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: u, Type: "file"})
	r.waitState(ingest.Batch, b, ingest.Completed, 60*time.Second)
	j := r.jobsOf(b)[0]
	if st := r.state(ingest.Job, j); st != ingest.Completed {
		t.Fatalf("job %s, want completed", st)
	}
	if o.gets.Load() < 13 {
		t.Errorf("%d GETs: the origin's faults were not all met", o.gets.Load())
	}
}

// TestStoreOutagePausesIngest: the blob store's root gone (an unmounted
// volume) while a job is to be stored used to fail it at once ("storing
// ...: not found"); ingest now pauses, spends no attempt, and the job
// completes once the root is back.
func TestStoreOutagePausesIngest(t *testing.T) {
	o := newOrigin(t)
	root := filepath.Join(t.TempDir(), "blobs")
	local, err := blob.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, local, map[string]string{"INGEST_MAX_ATTEMPTS": "1", "INGEST_RETRY_BUDGET": "0s"})
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/a.txt", []byte("stored later")), Type: "file"})
	time.Sleep(3 * time.Second)
	j := r.jobsOf(b)
	if len(j) == 1 {
		if st := r.state(ingest.Job, j[0]); st == ingest.Failed {
			t.Fatalf("the store's outage failed the job")
		}
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	r.waitState(ingest.Batch, b, ingest.Completed, 60*time.Second)
	var stored int
	r.db.QueryRow(context.Background(), `SELECT count(*) FROM curator.inventory_files`).Scan(&stored)
	if stored == 0 {
		t.Error("nothing in the inventory")
	}
}
