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

// TestParseCheckm reads fields by the #%fields line and names the line of
// a bad row.
func TestParseCheckm(t *testing.T) {
	rows, err := ingest.ParseCheckm(strings.NewReader("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName | mrt:localIdentifier\n" +
		"http://h/a | MD5 | ABC | 3 | dir/a.txt | loc1\nhttp://h/b.wav\n#%eof\nhttp://ignored/after/eof\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0] != (ingest.Row{URL: "http://h/a", DigestAlg: "md5", Digest: "abc", Size: 3, Name: "dir/a.txt", LocalID: "loc1"}) || rows[1].Name != "b.wav" {
		t.Errorf("rows %+v", rows)
	}
	for in, want := range map[string]string{
		"#%checkm_0.7\nftp://h/a\n": "line 2",
		"#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileSize\nhttp://h/a | many\n":                          "file size \"many\"",
		"#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\nhttp://h/a | ../../etc/passwd\n":              "escapes the object",
		"#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue\nhttp://h/a | crc7 | 1\n": "unknown hash algorithm",
		"just words\n": "line 1",
	} {
		if _, err := ingest.ParseCheckm(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}

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

// FuzzCheckm: no manifest makes the parser panic or return a row that is
// unsafe to store: every row has an http(s) URL and a safe, distinct name.
func FuzzCheckm(f *testing.F) {
	f.Add("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName | mrt:localIdentifier\nhttp://h/a | md5 | abc | 3 | dir/a.txt | loc1\n#%eof\n")
	f.Add("#%checkm_0.7\nhttp://h/a\nhttps://h/b.wav\n")
	f.Add("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\nhttp://h/a | ../../etc/passwd\n")
	f.Add("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\nhttp://h/a | x.txt\nhttp://h/b | x.txt\n")
	f.Add("just words\n")
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := ingest.ParseCheckm(strings.NewReader(in))
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, r := range rows {
			if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
				t.Fatalf("row URL %q", r.URL)
			}
			if r.Name == "" || strings.HasPrefix(r.Name, "/") || strings.Contains("/"+r.Name+"/", "/../") || strings.ContainsAny(r.Name, "|\x00\n") || names[r.Name] {
				t.Fatalf("unsafe or repeated name %q", r.Name)
			}
			names[r.Name] = true
		}
	})
}
