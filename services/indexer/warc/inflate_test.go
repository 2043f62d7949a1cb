package warc_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/archivist/archivist/services/indexer/warc"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
)

// read returns every record of data as o reads it, each as a line of what
// an index takes from it, then the fault, if any.
func read(t *testing.T, data []byte, o warc.Options) []string {
	t.Helper()
	r, err := warc.NewReaderOptions(bytes.NewReader(data), o)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			return append(out, "fault: "+err.Error())
		}
		out = append(out, fmt.Sprintf("%d+%d %s %v %q %x %x trunc=%v", rec.Offset, rec.Length, rec.Version, rec.Header,
			rec.Header.Get("WARC-Target-URI"), rec.Block, rec.PayloadSHA1, rec.Truncated))
	}
}

// TestWholeAndStreamedInflateAgree reads archives with members of every
// size, good and bad, with this build's inflate (libdeflate's whole-member
// one where built with -tags libdeflate; .ci/run runs this package so) and
// with the streaming one alone: the same records, offsets, lengths, digests
// and faults, at the same places.
func TestWholeAndStreamedInflateAgree(t *testing.T) {
	t.Logf("this build's inflate: %s", warc.Inflate)
	var pages, crawl bytes.Buffer
	if _, err := warctest.Pages(&pages, 3<<20, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := warctest.Crawl(&crawl, 6<<20, 2); err != nil {
		t.Fatal(err)
	}
	good := warcRecord("response", "http://a.example/", "HTTP/1.1 200 OK\r\n\r\nhello")
	noise := make([]byte, 3<<20) // a member longer than the buffer (1 MiB)
	rand.Read(noise)
	big := gz(warcRecord("response", "http://noise.example/", "HTTP/1.1 200 OK\r\n\r\n"+string(noise)))
	// A member whose content is larger than a whole inflate holds (4
	// MiB), in a few kilobytes.
	zeros := gz(warcRecord("resource", "http://zeros.example/", string(make([]byte, 20<<20))))
	flipped := bytes.Clone(pages.Bytes())
	flipped[len(flipped)/2] ^= 0x40
	truncated := pages.Bytes()[:pages.Len()-100]
	archives := map[string][]byte{
		"web pages":                 pages.Bytes(),
		"large records":             crawl.Bytes(),
		"a member over the buffer":  append(append(gz(good), big...), gz(good)...),
		"a content over 4 MiB":      append(append(gz(good), zeros...), gz(good)...),
		"a flipped bit":             flipped,
		"truncated":                 truncated,
		"two records in one member": append(gz(good), gz(good+good)...),
		"not gzip after gzip":       append(gz(good), []byte("plain text tail")...),
		"truncated in a member":     append(gz(good), gz(good[:len(good)-20])...),
	}
	digest := func(*warc.Record) (int, bool) { return 0, true }
	for name, data := range archives {
		t.Run(name, func(t *testing.T) {
			for _, o := range []warc.Options{{}, {Digest: digest}} {
				got, want := read(t, data, o), read(t, data, warc.Streamed(o))
				if len(got) < 2 {
					t.Fatalf("%d records read: %q", len(got), got)
				}
				if len(got) != len(want) {
					t.Fatalf("%d records, streamed %d", len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("record %d:\n%.300s\nstreamed:\n%.300s", i, got[i], want[i])
					}
				}
			}
		})
	}
}
