package warc_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/indexer/warc"

	"github.com/archivist/archivist/devkit/testenv"
)

func warcRecord(typ, uri, body string) string {
	return fmt.Sprintf("WARC/1.0\r\nWARC-Type: %s\r\nWARC-Target-URI: %s\r\nWARC-Date: 2026-01-02T03:04:05Z\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", typ, uri, len(body), body)
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func readAll(t *testing.T, data []byte) ([]*warc.Record, error) {
	t.Helper()
	r, err := warc.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out []*warc.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		cp := *rec
		out = append(out, &cp)
	}
}

func TestPlainAndGzippedOffsets(t *testing.T) {
	recs := []string{warcRecord("warcinfo", "", "software: test"), warcRecord("response", "http://a.example/", "HTTP/1.1 200 OK\r\n\r\nhello"),
		warcRecord("revisit", "http://a.example/", "")}
	plain := strings.Join(recs, "")
	got, err := readAll(t, []byte(plain))
	if err != nil || len(got) != 3 {
		t.Fatalf("plain: %d records, %v", len(got), err)
	}
	off := int64(0)
	for i, r := range got {
		// pywb's length of a record in a plain file leaves out the CRLF CRLF after it.
		if r.Offset != off || r.Length != int64(len(recs[i])-4) {
			t.Errorf("plain record %d at %d+%d, want %d+%d", i, r.Offset, r.Length, off, len(recs[i])-4)
		}
		off += int64(len(recs[i]))
	}
	if got[1].Type() != "response" || got[1].Header.Get("warc-target-uri") != "http://a.example/" || !bytes.HasSuffix(got[1].Block, []byte("hello")) {
		t.Errorf("record 1: %+v", got[1])
	}

	var file []byte
	var members [][]byte
	for _, r := range recs {
		m := gz(r)
		members = append(members, m)
		file = append(file, m...)
	}
	got, err = readAll(t, file)
	if err != nil || len(got) != 3 {
		t.Fatalf("gzip: %d records, %v", len(got), err)
	}
	off = 0
	for i, r := range got {
		if r.Offset != off || r.Length != int64(len(members[i])) {
			t.Errorf("gzip record %d at %d+%d, want %d+%d", i, r.Offset, r.Length, off, len(members[i]))
		}
		off += int64(len(members[i]))
	}
}

func TestFaultsIndexUpToTheFault(t *testing.T) {
	good := warcRecord("response", "http://a.example/", "HTTP/1.1 200 OK\r\n\r\nhello")
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated block", []byte(good + good[:len(good)-20]), "truncated record"},
		{"truncated in a gzip member", append(gz(good), gz(good[:len(good)-20])...), "truncated record"},
		{"bad length", []byte(good + strings.Replace(good, "Content-Length: ", "Content-Length: x", 1)), "bad Content-Length"},
		{"two records in one member", append(gz(good), gz(good+good)...), "several records in one gzip member"},
		{"not gzip after gzip", append(gz(good), []byte("plain text tail")...), "not a gzip member"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(t, c.data)
			var fe *warc.FormatError
			if !errors.As(err, &fe) || !strings.Contains(fe.Reason, c.want) {
				t.Fatalf("error %v, want a FormatError about %q", err, c.want)
			}
			if len(got) == 0 {
				t.Errorf("nothing read before the fault")
			}
		})
	}
}

func TestJunkBetweenWARCRecordsIsSkipped(t *testing.T) {
	good := warcRecord("response", "http://a.example/", "HTTP/1.1 200 OK\r\n\r\nhello")
	got, err := readAll(t, []byte(good+"left over from a wrong Content-Length\n"+good))
	if err != nil || len(got) != 2 {
		t.Fatalf("%d records, %v; want both records", len(got), err)
	}
	if want := int64(len(good) + len("left over from a wrong Content-Length\n")); got[1].Offset != want {
		t.Errorf("second record at %d, want %d", got[1].Offset, want)
	}
}

func TestARC(t *testing.T) {
	filedesc := "filedesc://x.arc 0.0.0.0 20140216050221 text/plain 10\n1 0 Test\n\n"
	body := "HTTP/1.1 200 OK\r\n\r\nhi"
	rec := fmt.Sprintf("http://example.com/a b 1.2.3.4 20140216050221 text/html %d\n%s\n", len(body), body)
	got, err := readAll(t, []byte(filedesc+rec))
	if err != nil || len(got) != 2 {
		t.Fatalf("%d records, %v", len(got), err)
	}
	if got[0].Type() != "warcinfo" || got[1].Type() != "response" {
		t.Errorf("types %s %s", got[0].Type(), got[1].Type())
	}
	if u := got[1].Header.Get("WARC-Target-URI"); u != "http://example.com/a b" {
		t.Errorf("URL with a space: %q", u)
	}
	// pywb's length of a plain ARC record leaves out the newline after the block.
	if got[1].Offset != int64(len(filedesc)) || got[1].Length != int64(len(rec)-1) {
		t.Errorf("ARC record at %d+%d, want %d+%d", got[1].Offset, got[1].Length, len(filedesc), len(rec)-1)
	}
}

// TestOffsetsMatchPywb reads every archive that pywb indexed without error
// and checks that each record pywb's CDX points at (offset V, length S) is
// a record this reader returns at the same place.
func TestOffsetsMatchPywb(t *testing.T) {
	root := testenv.SharedData(t, "warc", "every record pywb's CDX points at is one this reader returns at the same place")
	ref := filepath.Join(root, "reference")
	runlog, err := os.ReadFile(filepath.Join(ref, "RUNLOG.txt"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	sc := bufio.NewScanner(bytes.NewReader(runlog))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[1], "pywb-cdx=0(") {
			continue // pywb refused or crashed on it: a malformed case
		}
		rel := strings.TrimPrefix(fields[0], "./")
		cdx, err := os.ReadFile(filepath.Join(ref, rel+".pywb.cdx"))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, rerr := readAll(t, data)
		at := map[int64]int64{}
		for _, r := range got {
			at[r.Offset] = r.Length
		}
		for _, line := range strings.Split(strings.TrimSpace(string(cdx)), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 11 {
				continue
			}
			length, _ := strconv.ParseInt(f[len(f)-3], 10, 64)
			offset, _ := strconv.ParseInt(f[len(f)-2], 10, 64)
			if length < 0 || offset < 0 {
				continue // pywb's own nonsense on a broken file
			}
			if l, ok := at[offset]; !ok || l != length {
				t.Errorf("%s: pywb indexes a record at %d+%d; this reader has %v (fault: %v)", rel, offset, length, l, rerr)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no reference lines checked")
	}
	t.Logf("%d records pywb indexed found at the same offset and length", checked)
}

func TestNotAnArchive(t *testing.T) {
	got, err := readAll(t, []byte("this is no WARC at all\nnor an ARC\n"))
	var fe *warc.FormatError
	if len(got) != 0 || !errors.As(err, &fe) || !strings.Contains(fe.Reason, "not a WARC or ARC record header") {
		t.Errorf("%d records, %v", len(got), err)
	}
}
