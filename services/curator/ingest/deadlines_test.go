package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// oddOrigin serves one path with behaviour a test picks for HEAD and GET.
func oddOrigin(t *testing.T, head, get http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			head(w, r)
			return
		}
		get(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/file.bin"
}

// stream writes n bytes in chunks (no Content-Length), pausing between.
func stream(n int, chunk int, pause time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		buf := []byte(strings.Repeat("x", chunk))
		for sent := 0; sent < n; sent += chunk {
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if pause > 0 {
				select {
				case <-time.After(pause):
				case <-r.Context().Done():
					return
				}
			}
		}
	}
}

func reports(size int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Content-Length", fmt.Sprint(size)) }
}

// failedWith submits url as a one-file batch and waits for its job to
// fail, returning the reason.
func (r *rig) failedWith(url string, within time.Duration) string {
	r.t.Helper()
	batch := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: url, Type: "file"})
	var job int64
	deadline := time.Now().Add(within)
	for job == 0 && time.Now().Before(deadline) {
		if ids := r.jobsOf(batch); len(ids) > 0 {
			job = ids[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if job == 0 {
		r.t.Fatalf("batch %d made no job", batch)
	}
	r.waitState(ingest.Job, job, ingest.Failed, time.Until(deadline))
	var msg string
	r.db.QueryRow(context.Background(), "SELECT error FROM curator.jobs WHERE id = $1", job).Scan(&msg)
	return msg
}

// TestReportedSizesAreCappedAndChecked: the room a job reserves in the
// working area is what its manifest declares or its HEAD reports, so a
// download may not send more: a HEAD reporting more than
// INGEST_MAX_FILE_BYTES reserves nothing and fails the job before a byte
// is fetched; a GET sending more
// than its HEAD reported, or than the manifest declares, stops at that
// size and fails the job with the reason (before, the reported size was
// trusted and up to INGEST_MAX_FILE_BYTES was written).
func TestReportedSizesAreCappedAndChecked(t *testing.T) {
	r := newRig(t, map[string]string{"INGEST_MAX_FILE_BYTES": "1000000", "INGEST_MAX_ATTEMPTS": "2"})
	for _, c := range []struct {
		what      string
		head, get http.HandlerFunc
		want      string
	}{
		{"a HEAD beyond INGEST_MAX_FILE_BYTES", reports(5000000), stream(10, 10, 0), "its HEAD reported 5000000 bytes, more than INGEST_MAX_FILE_BYTES"},
		{"a GET announcing more than INGEST_MAX_FILE_BYTES", reports(10), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "2000000")
			w.Write([]byte(strings.Repeat("x", 2000000)))
		}, "announces 2000000 bytes, more than INGEST_MAX_FILE_BYTES"},
		{"a GET sending more than INGEST_MAX_FILE_BYTES", func(http.ResponseWriter, *http.Request) {}, stream(3000000, 4096, 0), "more bytes than INGEST_MAX_FILE_BYTES"},
	} {
		if got := r.failedWith(oddOrigin(t, c.head, c.get), 30*time.Second); !strings.Contains(got, c.want) {
			t.Errorf("%s: failed with %q, want %q", c.what, got, c.want)
		}
	}
	// A manifest's declared size bounds the GET as well.
	o := newOrigin(t)
	big := oddOrigin(t, reports(10), stream(50<<20, 64<<10, 0))
	murl := o.put("/manifests/declared.checkm", []byte("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n"+
		big+" | | | 10 | | declared.bin\n#%eof\n"))
	batch := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "manifest"})
	r.waitState(ingest.Batch, batch, ingest.Failed, 30*time.Second)
	jobs := r.jobsOf(batch)
	r.waitState(ingest.Job, jobs[0], ingest.Failed, 30*time.Second)
	var msg string
	r.db.QueryRow(context.Background(), "SELECT error FROM curator.jobs WHERE id = $1", jobs[0]).Scan(&msg)
	if !strings.Contains(msg, "more bytes than the manifest's size (10)") {
		t.Errorf("50 MiB for a file declared 10 bytes: failed with %q", msg)
	}
}

// TestDeadlinesPerStepAndJob: an origin trickling a body a few bytes at a
// time resets the idle timer for ever; INGEST_STEP_TIMEOUT ends each
// attempt, and the job fails once its attempts are spent, saying so.
// INGEST_JOB_TIMEOUT bounds the work on one job over all its attempts.
// Estimating asks its HEADs several at once within INGEST_ESTIMATE_TIMEOUT:
// a HEAD that never answers leaves the size unknown, the job goes on.
func TestDeadlinesPerStepAndJob(t *testing.T) {
	trickle := oddOrigin(t, reports(1<<20), stream(1<<20, 1, 50*time.Millisecond))
	r := newRig(t, map[string]string{"INGEST_STEP_TIMEOUT": "1s", "INGEST_IDLE_TIMEOUT": "1m", "INGEST_MAX_ATTEMPTS": "2", "INGEST_RETRIES": "1"})
	if got := r.failedWith(trickle, 60*time.Second); !strings.Contains(got, "INGEST_STEP_TIMEOUT") {
		t.Errorf("a trickled download: failed with %q, want the step timeout named", got)
	}
	r = newRig(t, map[string]string{"INGEST_STEP_TIMEOUT": "1s", "INGEST_JOB_TIMEOUT": "1500ms", "INGEST_MAX_ATTEMPTS": "20", "INGEST_RETRIES": "1"})
	if got := r.failedWith(trickle, 60*time.Second); !strings.Contains(got, "INGEST_JOB_TIMEOUT") {
		t.Errorf("a job worked on beyond its bound: failed with %q, want the job timeout named", got)
	}

	body := []byte("a file whose HEAD never answers")
	hangs := oddOrigin(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	r = newRig(t, map[string]string{"INGEST_ESTIMATE_TIMEOUT": "1s", "INGEST_REQUEST_TIMEOUT": "1m"})
	batch := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: hangs, Type: "file"})
	r.waitState(ingest.Batch, batch, ingest.Completed, 30*time.Second)
	var detail string
	r.db.QueryRow(context.Background(), `SELECT detail FROM curator.ingest_history WHERE entity = 'job' AND from_state = 'estimating'`).Scan(&detail)
	if !strings.Contains(detail, "1 of 1 sizes unknown (INGEST_ESTIMATE_TIMEOUT)") {
		t.Errorf("estimating past its timeout: %q", detail)
	}
}
