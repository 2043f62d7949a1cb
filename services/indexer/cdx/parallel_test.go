package cdx_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/archivist/archivist/services/indexer/cdx"
	"github.com/archivist/archivist/services/indexer/warc"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
)

// lines indexes data sequentially (Index) or in parallel (IndexAt) and
// returns the lines and the error.
func indexLines(t *testing.T, data []byte, workers int) ([]string, error) {
	t.Helper()
	var out []string
	add := func(e cdx.Entry) error { out = append(out, e.String()); return nil }
	var err error
	if workers == 0 {
		_, err = cdx.Index(bytes.NewReader(data), "crawl.warc.gz", add)
	} else {
		_, err = cdx.IndexAt(bytes.NewReader(data), int64(len(data)), "crawl.warc.gz", workers, add)
	}
	return out, err
}

// TestParallelIndexEqualsSequential: a 24 MB crawl indexed on 2 and 5
// cores gives the sequential read's lines, offsets and all; with a fault
// in the middle (a member cut short and garbage after), the same lines up
// to the fault and the same fault, at the same offset; with bytes that
// look like gzip headers inside stored (incompressible) payloads, the
// same lines.
func TestParallelIndexEqualsSequential(t *testing.T) {
	var buf bytes.Buffer
	responses, err := warctest.Crawl(&buf, 24<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	want, err := indexLines(t, data, 0)
	if err != nil || len(want) != responses {
		t.Fatalf("sequential: %d lines of %d responses: %v", len(want), responses, err)
	}
	for _, workers := range []int{2, 5} {
		got, err := indexLines(t, data, workers)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%d workers: %d lines (%v), want the sequential %d", workers, len(got), err, len(want))
		}
	}
	// A fault at 60%: the file cut inside a member, garbage after.
	cut := bytes.Clone(data[:len(data)*6/10])
	cut = append(cut, bytes.Repeat([]byte("not a gzip member "), 1<<20)...)
	want, werr := indexLines(t, cut, 0)
	var fe *warc.FormatError
	if !errors.As(werr, &fe) {
		t.Fatalf("sequential over a fault: %v, want a format error", werr)
	}
	for _, workers := range []int{2, 5} {
		got, err := indexLines(t, cut, workers)
		var ge *warc.FormatError
		if !errors.As(err, &ge) || ge.Offset != fe.Offset || ge.Reason != fe.Reason || !slices.Equal(got, want) {
			t.Errorf("%d workers over a fault: %d lines, %v; want %d lines, %v", workers, len(got), err, len(want), werr)
		}
	}
	// Records stored uncompressed whose payloads hold a whole gzip member
	// of a WARC record: a span may start at such a fake and must be
	// dropped for the sequential read's answer.
	fake := fakeMembers(t, 40)
	want, werr = indexLines(t, fake, 0)
	got, err := indexLines(t, fake, 4)
	if err != nil || werr != nil || len(want) != 40 || !slices.Equal(got, want) {
		t.Errorf("members inside payloads: %d lines (%v), want %d (%v)", len(got), err, len(want), werr)
	}
}

// fakeMembers is a gzipped WARC of n response records of 1 MiB, stored
// (not compressed), each payload holding, every 4 KiB, a gzip member of
// another WARC record's header.
func fakeMembers(t *testing.T, n int) []byte {
	t.Helper()
	var inner bytes.Buffer
	zw := gzip.NewWriter(&inner)
	zw.Write([]byte("WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://fake.example/\r\nWARC-Date: 2026-01-01T00:00:00Z\r\nContent-Length: 0\r\n\r\n\r\n\r\n"))
	zw.Close()
	var out bytes.Buffer
	for i := range n {
		payload := make([]byte, 1<<20)
		for j := range payload {
			payload[j] = byte(j*7 + i)
		}
		for off := 0; off+inner.Len() < len(payload); off += 4 << 10 {
			copy(payload[off:], inner.Bytes())
		}
		body := append(fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n"), payload...)
		rec := append(fmt.Appendf(nil, "WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://real.example/%d\r\nWARC-Date: 2026-03-01T00:00:00Z\r\nContent-Length: %d\r\n\r\n", i, len(body)), body...)
		rec = append(rec, "\r\n\r\n"...)
		w, _ := gzip.NewWriterLevel(&out, gzip.NoCompression)
		w.Write(rec)
		w.Close()
	}
	return out.Bytes()
}

// TestParallelIndexOnTheSharedWARCs: every gzipped WARC of the shared test
// data indexes the same in parallel as sequentially (they are small: the
// sequential path, checked all the same).
func TestParallelIndexOnTheSharedWARCs(t *testing.T) {
	root := warcs(t, "the shared gzipped WARCs index the same in parallel as sequentially")
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "*.warc.gz"))
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "*.warc.gz"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatalf("no gzipped WARC under %s", root)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := indexLines(t, data, 0)
		got, err := indexLines(t, data, 2)
		if fmt.Sprint(err) != fmt.Sprint(werr) || !slices.Equal(got, want) {
			t.Errorf("%s: %d lines (%v), want %d (%v)", f, len(got), err, len(want), werr)
		}
	}
}
