package ingest_test

import (
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
