package cdx_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/indexer/cdx"
	"github.com/archivist/archivist/services/indexer/warc"
)

func record(header, body string) string {
	return fmt.Sprintf("WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://a.example/\r\nWARC-Date: 2026-01-02T03:04:05Z\r\n%sContent-Length: %d\r\n\r\n%s\r\n\r\n", header, len(body), body)
}

func gzipped(parts ...io.Reader) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	for _, p := range parts {
		io.Copy(w, p)
	}
	w.Close()
	return b.Bytes()
}

// repeat is n bytes of c, without holding them.
func repeat(c byte, n int64) io.Reader { return io.LimitReader(byteReader(c), n) }

type byteReader byte

func (b byteReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestHostileArchivesIndexWithinBounds: each of the hostile files
// fails (or indexes) with a clear error and bounded memory.
func TestHostileArchivesIndexWithinBounds(t *testing.T) {
	http := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nhi"
	var cont strings.Builder
	cont.WriteString("WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://a.example/\r\nX-Long: start\r\n")
	for range 80_000 {
		cont.WriteString("\t x\r\n")
	}
	cont.WriteString("Content-Length: 2\r\n\r\nhi\r\n\r\n")
	cases := []struct {
		name    string
		data    []byte
		records int    // indexed before the fault
		fault   string // in the error, "" for none
		maxHeap uint64
	}{
		{"gzip member with 256 MB of blank after its record",
			gzipped(strings.NewReader(record("", http)), repeat(' ', 256<<20)), 0, "MaxTail", 8 << 20},
		{"declared Content-Length of 1 GiB in a small file",
			append([]byte(record("", http)[:100]), []byte("Content-Length: 1073741824\r\n\r\n"+strings.Repeat("x", 600<<10))...), 1, "", 8 << 20},
		{"80,000 continuation lines",
			[]byte(cont.String()), 1, "", 16 << 20},
		{"a 16 MB header line",
			append([]byte("WARC/1.0\r\nWARC-Type: response\r\nX: "), bytes.Repeat([]byte("a"), 16<<20)...), 0, "longer than 65536 bytes (MaxLine)", 8 << 20},
		{"a header of more than 1 MiB",
			[]byte("WARC/1.0\r\n" + strings.Repeat("X-A: "+strings.Repeat("b", 1100)+"\r\n", 990) + "\r\n"), 0, "(MaxHeader)", 8 << 20},
		{"200,000 header fields",
			[]byte("WARC/1.0\r\n" + strings.Repeat("X-A: b\r\n", 200_000) + "\r\n"), 0, "(MaxFields)", 8 << 20},
		{"Content-Length beyond MaxBlock",
			[]byte(record("", "")[:100] + "Content-Length: 9999999999999\r\n\r\n"), 0, "(MaxBlock)", 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var n int
			var err error
			heap := testenv.PeakHeap(func() {
				n, err = cdx.Index(bytes.NewReader(c.data), "x.warc", func(cdx.Entry) error { return nil })
			})
			t.Logf("%d bytes: %d records, %v; peak heap %d KiB", len(c.data), n, err, heap>>10)
			if n != c.records {
				t.Errorf("%d records indexed, want %d", n, c.records)
			}
			switch {
			case c.fault == "" && err != nil:
				// A truncated block is a fault after its record.
				if !strings.Contains(err.Error(), "truncated") {
					t.Errorf("error %v", err)
				}
			case c.fault != "" && (err == nil || !strings.Contains(err.Error(), c.fault)):
				t.Errorf("error %v, want one naming %q", err, c.fault)
			}
			if heap > c.maxHeap {
				t.Errorf("peak heap %d KiB, bound %d KiB", heap>>10, c.maxHeap>>10)
			}
		})
	}
}

// A block longer than the reader keeps is digested as it streams: the
// same digest as pywb's, whose payload it read whole.
func TestLongBlockDigestIsStreamed(t *testing.T) {
	payload := strings.Repeat("0123456789", 300_000) // 3 MB > MaxHead
	body := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + payload
	var got cdx.Entry
	if _, err := cdx.Index(strings.NewReader(record("", body)), "x.warc", func(e cdx.Entry) error { got = e; return nil }); err != nil {
		t.Fatal(err)
	}
	short := record("", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"+payload)
	rd, _ := warc.NewReaderOptions(strings.NewReader(short), warc.Options{Limits: warc.Limits{MaxHead: 64 << 20}})
	rec, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cdx.FromRecord(rec, "x.warc")
	if got.Digest != want.Digest || got.Digest == "" {
		t.Errorf("streamed digest %s, whole-block digest %s", got.Digest, want.Digest)
	}
}

// A record cannot forge fields of the CDX line: a tab or space in its URL
// and a payload digest holding spaces are escaped or refused, so the line
// keeps its 11 fields and its own offset and length.
func TestRecordsCannotForgeCDXFields(t *testing.T) {
	data := record("WARC-Payload-Digest: sha1:AAAA - - 1 999999 other.warc.gz\r\n", "HTTP/1.1 200 OK\r\n\r\nhi") +
		strings.Replace(record("", "HTTP/1.1 200 OK\r\n\r\nhi"), "http://a.example/", "http://b.example/x\ty 1 2 3", 1)
	var lines []string
	if _, err := cdx.Index(strings.NewReader(data), "x.warc", func(e cdx.Entry) error {
		lines = append(lines, e.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 11 || f[10] != "x.warc" || strings.Contains(l, "other.warc") {
			t.Errorf("line has %d fields: %q", len(f), l)
		}
	}
	if !strings.Contains(lines[1], "http://b.example/x%09y%201%202%203") {
		t.Errorf("URL not escaped: %q", lines[1])
	}
}

// FuzzIndex: no input makes the WARC/ARC reader or the CDX writer panic,
// hang or allocate past its bounds, and every line it writes has 11 fields.
// Seeds: the shared test archives when present, and synthetic records.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(record("", "HTTP/1.1 200 OK\r\n\r\nhi")))
	f.Add(gzipped(strings.NewReader(record("", "HTTP/1.1 200 OK\r\n\r\nhi"))))
	f.Add([]byte("filedesc://x.arc 0.0.0.0 20260101000000 text/plain 3\nabc\nhttp://a.example/ 1.2.3.4 20260101000000 text/html 21\nHTTP/1.1 200 OK\r\n\r\nhi\n"))
	f.Add([]byte("WARC/1.0\r\nContent-Length: 5\r\n X\r\n\r\nhello"))
	// (A fuzz target's seeds from other projects are optional: without
	// ARCHIVIST_TESTDATA it seeds with the synthetic records alone.)
	root := filepath.Join(os.Getenv(testenv.SharedDataVar), "warc")
	for _, name := range []string{"pywb/sample_archive/warcs/example.arc", "pywb/sample_archive/warcs/example.warc.gz", "pywb/sample_archive/warcs/example-extra.warc", "warcio/test/data/example-space-in-url.arc"} {
		if b, err := os.ReadFile(filepath.Join(root, name)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = cdx.Index(bytes.NewReader(b), "f.warc", func(e cdx.Entry) error {
			if n := len(strings.Fields(e.String())); n != 11 {
				t.Fatalf("CDX line of %d fields: %q", n, e.String())
			}
			_ = e.CDXJ()
			return nil
		})
	})
}
