package ingest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestJobViewsShowNoCredentials: GET /v1/jobs/{id} showed the payload URL
// as submitted, with the user info or presigned token it may carry; the
// view now shows it without them.
func TestJobViewsShowNoCredentials(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	u := strings.Replace(o.put("/cred.txt", []byte("c")), "http://", "http://depositor:hunter2@", 1) + "?X-Amz-Signature=s3cr3t"
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: u, Type: "file"})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	code, st := r.call("GET", "/v1/jobs/1", nil)
	body, _ := json.Marshal(st)
	if code != 200 || strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "s3cr3t") || !strings.Contains(string(body), "/cred.txt") {
		t.Errorf("job view: %d %s", code, body)
	}
}

// TestStoredErrorsKeepNoCredentials: a failure's message quoted the full
// URL, with its user info and presigned token, and it was stored in the
// job's error, its last attempt's error and its history, shown to every
// reader of job lists, histories and the dashboard. Every URL in a stored
// message is now redacted before it is written.
func TestStoredErrorsKeepNoCredentials(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	// A 404 (the job fails at once) and a 500 (an attempt fails and backs
	// off first), both quoting the URL.
	missing := strings.Replace(o.srv.URL+"/missing.txt", "http://", "http://depositor:hunter2@", 1) + "?X-Amz-Signature=s3cr3t"
	o.mu.Lock()
	o.fail["/flaky.txt"] = 2 // both tries of the first attempt
	o.mu.Unlock()
	flaky := strings.Replace(o.put("/flaky.txt", []byte("f")), "http://", "http://depositor:hunter2@", 1) + "?X-Amz-Signature=s3cr3t"
	b1 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: missing, Type: "file"})
	b2 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: flaky, Type: "file"})
	r.waitState(ingest.Batch, b1, ingest.Failed, 30*time.Second)
	r.waitState(ingest.Batch, b2, ingest.Completed, 30*time.Second)
	var stored string
	if err := r.db.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(error || ' ' || last_attempt_error, ' ') FROM curator.jobs) || ' ' ||
		(SELECT string_agg(detail, ' ') FROM curator.ingest_history) || ' ' ||
		(SELECT string_agg(error, ' ') FROM curator.batches)`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, "hunter2") || strings.Contains(stored, "s3cr3t") || !strings.Contains(stored, "/missing.txt") {
		t.Errorf("stored messages: %s", stored)
	}
}
