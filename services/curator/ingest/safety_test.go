package ingest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestSafety: a payload on a loopback address is refused unless private
// addresses are allowed; a container entry that escapes the object fails
// processing; a file over the size limit fails its download; a job over
// the large-job size is estimated behind the others; a working area
// without room keeps jobs in provisioning.
func TestSafety(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_ALLOW_PRIVATE": "false"})
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/f/a.txt", []byte("a")), Type: "file"})
	r.waitState(ingest.Batch, b, ingest.Failed, 20*time.Second)
	_, st := r.call("GET", "/v1/jobs/1", nil)
	if msg, _ := st["error"].(string); !strings.Contains(msg, "prohibited IP address") {
		t.Errorf("loopback payload: %q", msg)
	}

	r2 := newRig(t, map[string]string{"INGEST_MAX_FILE_BYTES": "1000", "INGEST_LARGE_JOB_BYTES": "500"})
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("../outside.txt")
	w.Write([]byte("x"))
	zw.Close()
	b = r2.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/f/evil.zip", zb.Bytes()), Type: "container"})
	r2.waitState(ingest.Batch, b, ingest.Failed, 20*time.Second)
	_, st = r2.call("GET", "/v1/jobs/1", nil)
	if msg, _ := st["error"].(string); !strings.Contains(msg, "escapes the object") {
		t.Errorf("escaping container: %q", msg)
	}
	b = r2.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/f/big.bin", bytes.Repeat([]byte("b"), 1001)), Type: "file"})
	r2.waitState(ingest.Batch, b, ingest.Failed, 20*time.Second)
	_, st = r2.call("GET", "/v1/jobs/2", nil)
	if msg, _ := st["error"].(string); !strings.Contains(msg, "more than INGEST_MAX_FILE_BYTES") {
		t.Errorf("oversized file: %q", msg)
	}
	if p, _ := st["priority"].(float64); p != 10 {
		t.Errorf("a 1001-byte job over the 500-byte large-job size has priority %v, want 10", st["priority"])
	}

	r3 := newRig(t, map[string]string{"INGEST_MIN_FREE_BYTES": "9223372036854775807"})
	b = r3.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/f/c.txt", []byte("c")), Type: "file"})
	r3.waitState(ingest.Job, 1, ingest.Provisioning, 20*time.Second)
	time.Sleep(500 * time.Millisecond) // several passes
	if s := r3.state(ingest.Job, 1); s != ingest.Provisioning {
		t.Errorf("job without room is %s, want provisioning", s)
	}
	// Waiting does not spin, even with more jobs waiting than slots: a job
	// that stays is not claimed again before an interval has passed.
	r3 = newRig(t, map[string]string{"INGEST_MIN_FREE_BYTES": "9223372036854775807", "INGEST_CONCURRENCY": "2", "INGEST_INTERVAL": "500ms"})
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n")
	for i := range 20 {
		fmt.Fprintf(&m, "%s/f/w%d.txt\n", o.srv.URL, i)
	}
	b = r3.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/f/wait.checkm", []byte(m.String())), Type: "batch-manifest"})
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		r3.db.QueryRow(context.Background(), `SELECT count(*) FROM curator.jobs WHERE state = 'provisioning'`).Scan(&n)
		if n == 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE public.job_updates (n bigint NOT NULL)`,
		`INSERT INTO public.job_updates VALUES (0)`,
		`CREATE FUNCTION public.count_job_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE public.job_updates SET n = n + 1; RETURN NEW; END $$`,
		`CREATE TRIGGER count_updates AFTER UPDATE ON curator.jobs FOR EACH ROW EXECUTE FUNCTION public.count_job_update()`,
	} {
		if _, err := r3.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	var updates int
	r3.db.QueryRow(ctx, `SELECT n FROM public.job_updates`).Scan(&updates)
	t.Logf("20 jobs waiting for room, 2 slots: %d updates in 2 s", updates)
	if updates > 400 {
		t.Errorf("20 jobs waiting for room were updated %d times in 2 s: the daemon spins", updates)
	}
}
