package ingest_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/fetch"
)

// The dial guard refuses every special-purpose range the old filter let
// through, and the embedded IPv4 forms, before any packet is sent (the
// check runs on the address alone here: nothing is dialled).
func TestDialGuardRefusesSpecialPurposeAddresses(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "0.1.2.3",
		"100.64.0.1", "198.18.0.1", "198.19.255.254", "192.0.0.8", "240.0.0.1", "255.255.255.255", "224.0.0.1",
		"::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "fec0::1", "ff02::1",
		"64:ff9b::7f00:1", "2002:7f00:1::1", "::127.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "2001::1", "2001:db8::1",
	} {
		network := "tcp4"
		if strings.Contains(addr, ":") {
			network = "tcp6"
		}
		if err := fetch.DialGuard(network, net.JoinHostPort(addr, "443"), nil); err == nil {
			t.Errorf("%s accepted", addr)
		}
	}
	for _, addr := range []string{"93.184.215.14", "8.8.8.8", "2606:4700::6810:85e5"} {
		network := "tcp4"
		if strings.Contains(addr, ":") {
			network = "tcp6"
		}
		if err := fetch.DialGuard(network, net.JoinHostPort(addr, "8080"), nil); err != nil {
			t.Errorf("public %s refused: %v", addr, err)
		}
	}
}

func zipOf(t *testing.T, entries map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// failsWith submits sub and waits until its batch has failed, returning
// the failed job's or the batch's reason.
func (r *rig) failsWith(sub ingest.Submission, want string) {
	r.t.Helper()
	b := r.submit(sub)
	r.waitState(ingest.Batch, b, ingest.Failed, 30*time.Second)
	var reason string
	r.db.QueryRow(context.Background(), `SELECT coalesce((SELECT error FROM curator.jobs WHERE batch_id = $1 AND state = 'failed' LIMIT 1),
		(SELECT error FROM curator.batches WHERE id = $1))`, b).Scan(&reason)
	if !strings.Contains(reason, want) {
		r.t.Errorf("batch %d failed with %q, want %q", b, reason, want)
	}
}

// TestHostileSubmissionsFailWithTheirBound: manifests and containers that
// break a bound fail their batch or job with the bound named, within
// bounded memory, and the curator goes on.
func TestHostileSubmissionsFailWithTheirBound(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_MAX_MANIFEST_ROWS": "50", "INGEST_MAX_ZIP_ENTRIES": "20", "INGEST_MAX_BATCH_FILES": "60"})
	sub := func(url, typ string) ingest.Submission {
		return ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: url, Type: typ}
	}

	// A 64 MB manifest sent gzipped (286 KB on the wire): the transport
	// inflates it; reading stops at INGEST_MAX_MANIFEST_BYTES.
	big := "#%checkm_0.7\n" + strings.Repeat("#"+strings.Repeat(" ", 1000)+"\n", 64<<10)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write([]byte(big))
	zw.Close()
	bomb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gz.Bytes())
	}))
	defer bomb.Close()
	t.Logf("manifest bomb: %d bytes gzipped, %d inflated", gz.Len(), len(big))
	heap := testenv.PeakHeap(func() { r.failsWith(sub(bomb.URL+"/m.checkm", "manifest"), "INGEST_MAX_MANIFEST_BYTES") })
	t.Logf("peak heap of the test process while the curator refused it: %d MiB", heap>>20)
	if heap > 128<<20 {
		t.Errorf("peak heap %d MiB", heap>>20)
	}

	rows := func(n int, prefix string) string {
		var b strings.Builder
		b.WriteString("#%checkm_0.7\n")
		for i := range n {
			fmt.Fprintf(&b, "%s/%s%d\n", o.srv.URL, prefix, i)
		}
		return b.String()
	}
	r.failsWith(sub(o.put("/rows.checkm", []byte(rows(51, "f"))), "batch-manifest"), "more than 50 rows (INGEST_MAX_MANIFEST_ROWS)")
	// Manifest of manifests: 3 object manifests of 25 files: 75 > 60.
	var mom strings.Builder
	mom.WriteString("#%checkm_0.7\n")
	for i := range 3 {
		fmt.Fprintf(&mom, "%s\n", o.put(fmt.Sprintf("/sub%d.checkm", i), []byte(rows(25, fmt.Sprintf("s%d-", i)))))
	}
	r.failsWith(sub(o.put("/mom.checkm", []byte(mom.String())), "manifest-of-manifests"), "more than 60 files (INGEST_MAX_BATCH_FILES)")
	r.failsWith(sub(o.put("/dup.checkm", []byte("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\n"+o.srv.URL+"/a | x.txt\n"+o.srv.URL+"/b | x.txt\n")), "manifest"), "also on line 3")
	r.failsWith(sub(o.put("/ctl.checkm", []byte("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\n"+o.srv.URL+"/a | x\x07.txt\n")), "manifest"), "control character")
	r.failsWith(sub(o.put("/long.checkm", []byte("#%checkm_0.7\n"+o.srv.URL+"/"+strings.Repeat("a", 70<<10)+"\n")), "manifest"), "longer than 65536 bytes")

	// A 200 MB entry deflated to ~200 KB: refused from the central
	// directory before a byte is written.
	zbomb := zipOf(t, map[string][]byte{"zeros.bin": make([]byte, 200<<20)})
	t.Logf("zip bomb: %d bytes", len(zbomb))
	r.failsWith(sub(o.put("/bomb.zip", zbomb), "container"), "INGEST_MAX_ZIP_RATIO")
	many := map[string][]byte{}
	for i := range 21 {
		many[fmt.Sprintf("f%d.txt", i)] = []byte("x")
	}
	r.failsWith(sub(o.put("/many.zip", zipOf(t, many)), "container"), "more than 20 entries (INGEST_MAX_ZIP_ENTRIES)")
	r.failsWith(sub(o.put("/pipe.zip", zipOf(t, map[string][]byte{"a|b.txt": []byte("x")})), "container"), "holds '|'")
	r.failsWith(sub(o.put("/case.zip", zipOf(t, map[string][]byte{"A.txt": []byte("x"), "a.txt": []byte("y")})), "container"), "in the container twice")

	// The curator still serves.
	good := r.submit(sub(o.put("/fine.txt", []byte("fine")), "file"))
	r.waitState(ingest.Batch, good, ingest.Completed, 30*time.Second)
}

// TestSilentOriginsAreCutOff: an origin that accepts and never answers, and
// one that stops sending mid-body, fail their downloads after
// INGEST_RESPONSE_TIMEOUT and INGEST_IDLE_TIMEOUT instead of holding a
// worker for ever.
func TestSilentOriginsAreCutOff(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/stall" {
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("some"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	r := newRig(t, map[string]string{"INGEST_RESPONSE_TIMEOUT": "300ms", "INGEST_IDLE_TIMEOUT": "300ms", "INGEST_REQUEST_TIMEOUT": "300ms"})
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: slow.URL + "/silent", Type: "file"}, "timeout awaiting response headers")
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: slow.URL + "/stall", Type: "file"}, "INGEST_IDLE_TIMEOUT")
}

// TestCrashedAttemptsFailTheBatch: a batch whose every claim died (its
// attempts counted at claim, none finished) is failed with the reason once
// INGEST_MAX_ATTEMPTS is used up, instead of killing replica after replica.
func TestCrashedAttemptsFailTheBatch(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_MAX_ATTEMPTS": "3"})
	// Pause the queue so the batch waits in pending, then record three
	// claims that never finished, as three crashed curators would leave it.
	if code, _ := r.call("POST", "/v1/ingest/pause", nil); code/100 != 2 {
		t.Fatalf("pause: %d", code)
	}
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/x.txt", []byte("x")), Type: "file"})
	if _, err := r.db.Exec(context.Background(), `UPDATE curator.batches SET attempts = 3 WHERE id = $1 AND state = 'pending'`, b); err != nil {
		t.Fatal(err)
	}
	if code, _ := r.call("POST", "/v1/ingest/resume", nil); code/100 != 2 {
		t.Fatalf("resume: %d", code)
	}
	r.waitState(ingest.Batch, b, ingest.Failed, 20*time.Second)
	var reason string
	r.db.QueryRow(context.Background(), `SELECT error FROM curator.batches WHERE id = $1`, b).Scan(&reason)
	if !strings.Contains(reason, "gave up after 3 attempts") || !strings.Contains(reason, "crashed or hung") {
		t.Errorf("reason %q", reason)
	}
}

// TestBatchManifestStreamsIntoTheDatabase: a batch manifest of 50,000 rows
// becomes 50,000 jobs without the batch ever being held in memory: it is
// checked row by row, then streamed again into COPY.
func TestBatchManifestStreamsIntoTheDatabase(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_CONCURRENCY": "1"})
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n")
	const n = 50_000
	for i := range n {
		fmt.Fprintf(&m, "%s/missing/%d | f%d.txt | local-%d\n", o.srv.URL, i, i, i)
	}
	url := o.put("/big.checkm", []byte(m.String()))
	var b int64
	heap := testenv.PeakHeap(func() {
		b = r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: url, Type: "batch-manifest"})
		r.waitState(ingest.Batch, b, ingest.Processing, 60*time.Second)
	})
	r.call("POST", "/v1/ingest/pause", nil)
	var jobs int
	r.db.QueryRow(context.Background(), `SELECT count(*) FROM curator.jobs WHERE batch_id = $1`, b).Scan(&jobs)
	if jobs != n {
		t.Fatalf("%d jobs, want %d", jobs, n)
	}
	t.Logf("%d-row batch manifest (%d KiB) into jobs: peak heap %d MiB", n, m.Len()>>10, heap>>20)
	if heap > 48<<20 {
		t.Errorf("peak heap %d MiB", heap>>20)
	}
}

// TestStatusLineThatPostgresCannotStore: an origin answering 404 with a
// status line of invalid UTF-8 and a NUL fails its job once (a 4xx is
// permanent), with the reason made
// storable, instead of a move that can never be saved being tried for ever.
func TestStatusLineThatPostgresCannotStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				c.Read(buf)
				c.Write([]byte("HTTP/1.1 404 bad \xff\xfe\x00 news\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}()
		}
	}()
	r := newRig(t, nil)
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: "http://" + ln.Addr().String() + "/x.bin", Type: "file"}, "404 bad")
	var detail string
	r.db.QueryRow(context.Background(), `SELECT error FROM curator.jobs LIMIT 1`).Scan(&detail)
	if strings.ContainsRune(detail, 0) || strings.Contains(detail, "gave up") {
		t.Errorf("job failed with %q: want the status line, storable, on its first failure", detail)
	}
}
