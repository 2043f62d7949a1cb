package cdx_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/surt"
	"github.com/archivist/archivist/services/indexer/cdx"

	"github.com/archivist/archivist/devkit/testenv"
)

func TestSURT(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.com?example=1":                   "com,example)/?example=1",
		"http://www.iana.org/domains/example":            "org,iana)/domains/example",
		"https://www.iana.org/_css/2013.1/fonts/A.ttf":   "org,iana)/_css/2013.1/fonts/a.ttf",
		"http://archive.org/goo/?a=2&b&a=1":              "org,archive)/goo?a=1&a=2&b",
		"http://Example.COM:80/a/b/../c/#frag":           "com,example)/a/c",
		"http://example.com:8080/":                       "com,example:8080)/",
		"metadata://gnu.org/software/wget/warc/wget.log": "org,gnu)/software/wget/warc/wget.log",
		"dns:example.com":                                "dns:example.com",
		"urn:X-wpull:log":                                "urn:x-wpull:log",
		"file:///example%20with%20spaces.png":            "file:/example%20with%20spaces.png",
	} {
		if got := surt.Key(in); got != want {
			t.Errorf("surt.Key(%q) = %q, want %q", in, got, want)
		}
	}
}

// index reads an archive and returns its sorted CDX11 file, as pywb's
// cdx-indexer -s writes it, and its sorted CDXJ file (-s -j).
func index(t *testing.T, data []byte, filename string) (string, string, error) {
	var lines, jlines []string
	_, fault := cdx.Index(bytes.NewReader(data), filename, func(e cdx.Entry) error {
		lines = append(lines, e.String())
		jlines = append(jlines, e.CDXJ())
		return nil
	})
	sort.Strings(lines)
	sort.Strings(jlines)
	var b, j strings.Builder
	b.WriteString(cdx.Header + "\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	for _, l := range jlines {
		j.WriteString(l + "\n")
	}
	return b.String(), j.String(), fault
}

// warcs is the shared archives (pywb's, warcio's, and their reference
// CDX), or a skip saying what the test would have shown.
func warcs(tb testing.TB, what string) string { return testenv.SharedData(tb, "warc", what) }

func TestMatchesPywb(t *testing.T) {
	root := warcs(t, "CDX identical to pywb's cdx-indexer on its and warcio's sample archives")
	ref := filepath.Join(root, "reference")
	runlog, err := os.ReadFile(filepath.Join(ref, "RUNLOG.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(runlog))
	same, total := 0, 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "pywb-cdx=0(") {
			continue
		}
		rel := strings.TrimPrefix(f[0], "./")
		want, err := os.ReadFile(filepath.Join(ref, rel+".pywb.cdx"))
		if err != nil {
			continue
		}
		if strings.Contains(string(want), " -") && negative.MatchString(string(want)) {
			// pywb wrote negative lengths or offsets: it misread a file with
			// several records in one gzip member. This indexer indexes the
			// first and fails the file with that reason instead.
			continue
		}
		data, _ := os.ReadFile(filepath.Join(root, rel))
		got, gotJ, _ := index(t, data, filepath.Base(rel))
		total++
		wantJ, err := os.ReadFile(filepath.Join(ref, rel+".pywb.cdxj"))
		if err != nil {
			t.Fatal(err)
		}
		if gotJ != string(wantJ) {
			t.Errorf("%s CDXJ differs:\n--- pywb\n%s--- ours\n%s", rel, wantJ, gotJ)
			continue
		}
		if rel == "warcio/test/data/example-space-in-url.arc" {
			// The one deliberate difference: pywb writes this ARC record's
			// URL with raw spaces, which add fields to the CDX11 line; ours
			// writes them as %20.
			want = []byte(strings.ReplaceAll(string(want), "Examples From The Live Web", "Examples%20From%20The%20Live%20Web"))
		}
		if got == string(want) {
			same++
			continue
		}
		t.Errorf("%s differs:\n--- pywb\n%s--- ours\n%s", rel, want, got)
	}
	if total < 40 {
		t.Errorf("only %d reference files compared", total)
	}
	t.Logf("%d of %d files byte-identical to pywb's cdx-indexer -s, CDX11 and CDXJ", same, total)
}

var negative = regexp.MustCompile(` -[0-9]+ `)

// TestMatchesCDXJIndexer: on every archive of the shared data that
// webrecorder's cdxj-indexer indexed, its dialect (CDXJ, and CDX11 with
// -11) is line for line what cdxj-indexer wrote (which writes file order;
// compared sorted).
func TestMatchesCDXJIndexer(t *testing.T) {
	root := warcs(t, "CDXJ identical to webrecorder's cdxj-indexer on its, pywb's and warcio's sample archives")
	ref := filepath.Join(root, "reference")
	same, total := 0, 0
	err := filepath.WalkDir(ref, func(p string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".cdxj-indexer.cdxj") {
			return err
		}
		if _, err := os.Stat(p + ".err"); err == nil {
			return nil // cdxj-indexer refused the file
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, ref+string(filepath.Separator)), ".cdxj-indexer.cdxj")
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil
		}
		var j, c []string
		cdx.Index(bytes.NewReader(data), filepath.Base(rel), func(e cdx.Entry) error {
			j, c = append(j, e.CDXJIndexer()), append(c, e.CDX11Indexer())
			return nil
		})
		total++
		ok := true
		for ext, got := range map[string][]string{".cdxj-indexer.cdxj": j, ".cdxj-indexer.cdx": c} {
			raw, err := os.ReadFile(filepath.Join(ref, rel+ext))
			if err != nil {
				return err
			}
			var want []string
			for _, l := range strings.Split(string(raw), "\n") {
				if l != "" && l != cdx.Header {
					want = append(want, l)
				}
			}
			sort.Strings(want)
			sort.Strings(got)
			if !slices.Equal(got, want) {
				ok = false
				t.Errorf("%s%s differs:\n--- cdxj-indexer\n%s\n--- ours\n%s", rel, ext, strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
		}
		if ok {
			same++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total < 30 {
		t.Errorf("only %d reference files compared", total)
	}
	t.Logf("%d of %d files line for line cdxj-indexer's, CDXJ and CDX11", same, total)
}

// TestTheTwoCDXJDialects: where pywb's cdx-indexer and webrecorder's
// cdxj-indexer write a record differently, each dialect writes it as its
// tool does: the digest's algorithm (cdxj-indexer keeps "sha1:"), a
// revisit's HTTP status (cdxj-indexer keeps it), a response with no
// declared type (pywb: "unk"; cdxj-indexer: no mime), a response whose
// status line does not read (pywb: 200; cdxj-indexer: none), and pywb's
// mime-detected.
func TestTheTwoCDXJDialects(t *testing.T) {
	rec := func(typ, uri, headers, block string) string {
		return fmt.Sprintf("WARC/1.0\r\nWARC-Type: %s\r\nWARC-Target-URI: %s\r\nWARC-Date: 2026-01-02T03:04:05Z\r\n%sContent-Length: %d\r\n\r\n%s\r\n\r\n",
			typ, uri, headers, len(block), block)
	}
	warcFile := rec("response", "http://example.com/", "WARC-Payload-Digest: sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\nWARC-Identified-Payload-Type: text/html\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\nhi") +
		rec("revisit", "http://example.com/", "WARC-Payload-Digest: sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n") +
		rec("response", "http://example.com/none", "", "HTTP/1.1 302 Found\r\nLocation: /\r\n\r\n") +
		rec("response", "http://example.com/odd", "", "not http at all")
	var pywb, cdxjIndexer []string
	if _, err := cdx.Index(strings.NewReader(warcFile), "f.warc", func(e cdx.Entry) error {
		pywb, cdxjIndexer = append(pywb, e.CDXJ()), append(cdxjIndexer, e.CDXJIndexer())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ pywb, cdxjIndexer string }{
		{`com,example)/ 20260102030405 {"url": "http://example.com/", "mime": "text/html", "mime-detected": "text/html", "status": "200", "digest": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "length": "`,
			`com,example)/ 20260102030405 {"url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "length": "`},
		{`com,example)/ 20260102030405 {"url": "http://example.com/", "mime": "warc/revisit", "digest": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "length": "`,
			`com,example)/ 20260102030405 {"url": "http://example.com/", "mime": "warc/revisit", "status": "304", "digest": "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "length": "`},
		{`com,example)/none 20260102030405 {"url": "http://example.com/none", "mime": "unk", "status": "302", "digest": "`,
			`com,example)/none 20260102030405 {"url": "http://example.com/none", "status": "302", "digest": "sha1:`},
		{`com,example)/odd 20260102030405 {"url": "http://example.com/odd", "mime": "unk", "status": "200", "digest": "`,
			`com,example)/odd 20260102030405 {"url": "http://example.com/odd", "digest": "sha1:`},
	} {
		if i >= len(pywb) || !strings.HasPrefix(pywb[i], want.pywb) || !strings.HasPrefix(cdxjIndexer[i], want.cdxjIndexer) {
			t.Errorf("record %d:\n pywb's         %s\n want          %s...\n cdxj-indexer's %s\n want          %s...", i, pywb[i], want.pywb, cdxjIndexer[i], want.cdxjIndexer)
		}
	}
}

// TestMalformedFiles: for every malformed archive in the shared test data,
// what is indexed and the reason the file fails.
func TestMalformedFiles(t *testing.T) {
	root := warcs(t, "what is indexed of each malformed archive of the shared data, and why it fails")
	const multi = "several records in one gzip member"
	for _, c := range []struct {
		file    string
		indexed int
		reason  string // "" for no fault
	}{
		// Whole-file gzip (gowarc's .open files): the first record, then the fault.
		{"internetarchive-gowarc/testdata/warcs/corrupted-mid-record.warc.gz.open", 1, multi},
		{"internetarchive-gowarc/testdata/warcs/corrupted-trailing-bytes.warc.gz.open", 1, multi},
		{"internetarchive-gowarc/testdata/warcs/good.warc.gz.open", 1, multi},
		{"internetarchive-gowarc/testdata/warcs/skip-non-open.warc.gz", 1, multi},
		{"slyrz-warc/testdata/test.warc.gz", 1, multi},
		// Not gzipped per record; the first record is a warcinfo (not indexed).
		{"pywb/sample_archive/warcs/example-bad.warc.gz.bad", 0, multi},
		{"warcio/test/data/example-bad.warc.gz.bad", 0, multi},
		{"warcio/test/data/example-bad-non-chunked.warc.gz", 0, multi},
		// Declared lengths beyond the data: the record is indexed as pywb
		// does, and the file fails.
		{"warcio/test/data/example-space-in-url.arc", 1, "truncated record"},
		{"warcio/test/data/example-wrong-chunks.warc.gz", 1, "truncated record"},
		// A wrong Content-Length leaves junk before the next record: skipped,
		// as pywb does.
		{"pywb/sample_archive/warcs/example.warc", 3, ""},
		// pywb crashes on it; every record is readable.
		{"slyrz-warc/testdata/test.warc", 10, ""},
		// An ARC with a filedesc of length -1 and records of length -1, 1 and "abc".
		{"pywb/sample_archive/warcs/bad.arc", 3, ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, c.file))
			if err != nil {
				t.Fatal(err)
			}
			n, err := cdx.Index(bytes.NewReader(data), filepath.Base(c.file), func(cdx.Entry) error { return nil })
			if n != c.indexed {
				t.Errorf("%d entries indexed, want %d", n, c.indexed)
			}
			switch {
			case c.reason == "" && err != nil:
				t.Errorf("fault %v, want none", err)
			case c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason)):
				t.Errorf("fault %v, want one saying %q", err, c.reason)
			}
		})
	}
}
