package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/report"
)

// TestBatchReportsAreSentWithWhatChanged: a batch's report was written but
// never sent to the depositor, and update-reporting overwrote it without
// saying what changed. Now each report goes to the batch's callback; the
// one after update-reporting says when the previous was written and which
// jobs changed (the failed one, requeued, now completed); both are kept.
func TestBatchReportsAreSentWithWhatChanged(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	var mu sync.Mutex
	var reports []report.Report
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var rep report.Report
		if json.Unmarshal(b, &rep) == nil && rep.Type == "batch-report" {
			mu.Lock()
			reports = append(reports, rep)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer cb.Close()
	murl, files := o.manifest("rep", 3)
	o.mu.Lock()
	delete(o.files, "/files/rep-001.txt") // its download fails
	o.mu.Unlock()
	id := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest", CallbackURL: cb.URL})
	r.waitState(ingest.Batch, id, ingest.Failed, 60*time.Second)
	var failedJob int64
	r.db.QueryRow(context.Background(), `SELECT id FROM curator.jobs WHERE batch_id = $1 AND state = 'failed'`, id).Scan(&failedJob)
	o.put("/files/rep-001.txt", files["rep-001.txt"])
	if code, out := r.call("POST", fmt.Sprintf("/v1/jobs/%d/requeue", failedJob), nil); code != http.StatusOK {
		t.Fatalf("requeue: %d %v", code, out)
	}
	r.waitState(ingest.Job, failedJob, ingest.Completed, 60*time.Second)
	if code, out := r.call("POST", fmt.Sprintf("/v1/batches/%d/update-reporting", id), nil); code != http.StatusOK {
		t.Fatalf("update-reporting: %d %v", code, out)
	}
	r.waitState(ingest.Batch, id, ingest.Completed, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 2 {
		t.Fatalf("%d reports sent to the callback, want 2", len(reports))
	}
	first, second := reports[0], reports[1]
	if first.Sequence != 1 || len(first.Objects) != 2 || len(first.Failed) != 1 || first.Changes != nil {
		t.Errorf("first report: %+v", first)
	}
	if second.Sequence != 2 || len(second.Objects) != 3 || len(second.Failed) != 0 || second.PreviousWrittenAt == nil ||
		!second.PreviousWrittenAt.Equal(first.WrittenAt) {
		t.Errorf("second report: %+v", second)
	}
	if len(second.Changes) != 1 || second.Changes[0].Job != failedJob || second.Changes[0].Now != "completed v1" ||
		second.Changes[0].Was != "failed in "+string(first.Failed[0].State) {
		t.Errorf("changes %+v, want job %d: failed -> completed v1", second.Changes, failedJob)
	}
	for _, key := range []string{fmt.Sprintf("reports/batch-%d-1.json", id), fmt.Sprintf("reports/batch-%d-2.json", id), fmt.Sprintf("reports/batch-%d.json", id)} {
		if _, err := r.bs.Stat(context.Background(), key); err != nil {
			t.Errorf("report %s: %v", key, err)
		}
	}
}
