package ingest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestSubmitWithIdempotencyKey: a depositor whose POST's answer was lost
// (the curator restarted, a timeout) retries with the same Idempotency-Key
// and gets the batch the first POST made, not a second batch of the same
// files; the key is the submitter's own, and a key reused for another
// submission is refused.
func TestSubmitWithIdempotencyKey(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	murl, _ := o.manifest("idem", 3)
	post := func(sub ingest.Submission, key string) (int, map[string]any) {
		return r.callWith("POST", "/v1/batches", sub, map[string]string{"Idempotency-Key": key})
	}
	sub := ingest.Submission{Submitter: "alice", Profile: "p", PayloadURL: murl, Type: "batch-manifest"}
	code, first := post(sub, "batch-2026-11-23")
	if code != http.StatusCreated {
		t.Fatalf("first POST: %d %v", code, first)
	}
	code, again := post(sub, "batch-2026-11-23")
	if code != http.StatusOK || again["batch"] != first["batch"] {
		t.Fatalf("retry: %d %v, want 200 and batch %v", code, again, first["batch"])
	}
	other := sub
	other.Submitter = "bob"
	if code, out := post(other, "batch-2026-11-23"); code != http.StatusCreated || out["batch"] == first["batch"] {
		t.Errorf("another submitter's same key: %d %v, want a batch of its own", code, out)
	}
	changed := sub
	changed.Profile = "q"
	if code, out := post(changed, "batch-2026-11-23"); code != http.StatusConflict {
		t.Errorf("the key reused for another submission: %d %v, want 409", code, out)
	}
	if code, out := post(sub, "has space"); code != http.StatusBadRequest || out["field"] != "Idempotency-Key" {
		t.Errorf("a key with a space: %d %v, want 400 naming the header", code, out)
	}
	r.waitState(ingest.Batch, int64(first["batch"].(float64)), ingest.Completed, 30*time.Second)
	var jobs int
	r.db.QueryRow(t.Context(), "SELECT count(*) FROM curator.jobs j JOIN curator.batches b ON b.id = j.batch_id WHERE b.submitter = 'alice'").Scan(&jobs)
	if jobs != 3 {
		t.Errorf("alice's retried submission made %d jobs, want 3", jobs)
	}
}
