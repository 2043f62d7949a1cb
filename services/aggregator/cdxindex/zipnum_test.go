package cdxindex_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// writeCluster writes lines (sorted here) as a ZipNum cluster "test" in a
// new directory, blocks of blockLines, parts of about partBytes.
func writeCluster(t *testing.T, lines []string, blockLines int, partBytes int64) (string, *cdxindex.ZipNumWriter) {
	t.Helper()
	dir := t.TempDir()
	z, err := cdxindex.NewZipNumWriter(dir, "test", blockLines, partBytes)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	// Through Merge, as the aggregator writes it (header and all).
	if _, err := cdxindex.Merge(z, strings.NewReader(strings.Join(lines, "\n")+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, z
}

// openCluster opens a cluster written by writeCluster from its files alone.
func openCluster(t *testing.T, dir string) *cdxindex.Cluster {
	t.Helper()
	idx, err := os.Open(filepath.Join(dir, "test.idx"))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	loc, err := os.Open(filepath.Join(dir, "test.loc"))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	c, err := cdxindex.OpenCluster(idx, loc, func(location string) (io.ReaderAt, error) {
		return os.Open(filepath.Join(dir, location))
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterAgainstAScan: queries on a ZipNum cluster (several parts,
// small blocks) answer what a scan of its lines answers, reading at most
// the blocks their lines are in plus one; scanning the cluster gives back
// its lines.
func TestClusterAgainstAScan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var lines []string
	for range 5000 {
		lines = append(lines, fmt.Sprintf("com,site%02d)/p%d %d http://x/ text/html 200 D - - 10 %d f.warc.gz",
			r.IntN(40), r.IntN(30), 20260101000000+r.IntN(100000), r.IntN(1000)))
	}
	dir, z := writeCluster(t, lines, 50, 4<<10)
	if z.Lines() != int64(len(dedup(lines))) || z.Blocks() != (z.Lines()+49)/50 || len(z.Files()) < 4 {
		t.Fatalf("wrote %d lines in %d blocks, files %v; want %d lines in blocks of 50 over several parts", z.Lines(), z.Blocks(), z.Files(), len(dedup(lines)))
	}
	c := openCluster(t, dir)
	lines = dedup(lines)
	for i := range 400 {
		q := cdxindex.Query{Key: fmt.Sprintf("com,site%02d)/p%d", r.IntN(45), r.IntN(35))}
		switch i % 4 {
		case 1:
			q.Prefix, q.Key = true, q.Key[:len(q.Key)-1]
		case 2:
			q.From, q.To = "202601010300", "202601010500"
		case 3:
			q.Prefix, q.Key = true, q.Key[:len("com,site0")]
		}
		cur := c.Cursor(q)
		var got []string
		for {
			l, ok := cur.Next()
			if !ok {
				break
			}
			got = append(got, l)
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		want := scanLines(lines, q)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("query %+v: %d lines, want %d", q, len(got), len(want))
		}
		if spans := (len(want)+49)/50 + 2; cur.BlocksRead > spans {
			t.Errorf("query %+v read %d blocks for %d lines", q, cur.BlocksRead, len(want))
		}
	}
	var parts []string
	for _, b := range c.Blocks() {
		if len(parts) == 0 || parts[len(parts)-1] != b.Part {
			parts = append(parts, b.Part)
		}
	}
	all, err := io.ReadAll(io.LimitReader(cdxindex.ScanCluster(parts, func(p string) (io.ReadCloser, error) { return os.Open(filepath.Join(dir, p+".cdx.gz")) }), 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, []byte(strings.Join(lines, "\n")+"\n")) {
		t.Errorf("a scan of the cluster: %d bytes, not its %d lines", len(all), len(lines))
	}
}

// TestClusterSummaryIsPywbs: the summary and location files are the
// layout pywb's ZipNumIndexSource reads: key and timestamp, part, offset,
// length and a block number from 1, tab-separated; part, tab, file.
func TestClusterSummaryIsPywbs(t *testing.T) {
	var lines []string
	for i := range 7 {
		lines = append(lines, fmt.Sprintf("com,example)/%d 2026010100000%d http://example.com/%d text/html 200 D - - 10 0 f.warc.gz", i, i, i))
	}
	dir, _ := writeCluster(t, lines, 3, 0)
	idx, _ := os.ReadFile(filepath.Join(dir, "test.idx"))
	loc, _ := os.ReadFile(filepath.Join(dir, "test.loc"))
	rows := strings.Split(strings.TrimSpace(string(idx)), "\n")
	if len(rows) != 3 {
		t.Fatalf("summary %q: want 3 blocks", idx)
	}
	var next int64
	for i, row := range rows {
		var key, ts, part string
		var off, length, num int64
		if n, err := fmt.Sscanf(row, "%s %s\t%s\t%d\t%d\t%d", &key, &ts, &part, &off, &length, &num); n != 6 || err != nil {
			t.Fatalf("summary line %q: %v", row, err)
		}
		if key != fmt.Sprintf("com,example)/%d", i*3) || part != "test-00000" || off != next || num != int64(i+1) {
			t.Errorf("summary line %d: %q", i, row)
		}
		next = off + length
	}
	if string(loc) != "test-00000\ttest-00000.cdx.gz\n" {
		t.Errorf("location file %q", loc)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "test-00000.cdx.gz")); fi == nil || fi.Size() != next {
		t.Errorf("the part is not the blocks end to end (%d bytes)", next)
	}
}

func dedup(lines []string) []string {
	sort.Strings(lines)
	out := lines[:0:0]
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			out = append(out, l)
		}
	}
	return out
}

// scanLines is what a query selects from sorted lines, by a plain scan.
func scanLines(lines []string, q cdxindex.Query) []string {
	var out []string
	for _, l := range lines {
		k, rest, _ := strings.Cut(l, " ")
		ts, _, _ := strings.Cut(rest, " ")
		if q.Prefix && !strings.HasPrefix(k, q.Key) || !q.Prefix && k != q.Key {
			continue
		}
		if q.From != "" && ts < q.From || q.To != "" && ts > q.To && !strings.HasPrefix(ts, q.To) {
			continue
		}
		out = append(out, l)
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	return out
}

// TestClusterLongLines: a line longer than the cursor's read buffer (a
// data: URL of 200 KiB) comes back whole, and the lines after it too.
func TestClusterLongLines(t *testing.T) {
	long := "com,example)/long 20260101000000 http://example.com/long?" + strings.Repeat("x", 200<<10) + " text/html 200 D - - 10 0 f.warc.gz"
	lines := []string{long, "com,example)/a 20260101000000 http://example.com/a text/html 200 D - - 10 0 f.warc.gz",
		"com,example)/z 20260101000000 http://example.com/z text/html 200 D - - 10 0 f.warc.gz"}
	dir, _ := writeCluster(t, lines, 2, 0)
	c := openCluster(t, dir)
	cur := c.Cursor(cdxindex.Query{Key: "com,example)/", Prefix: true})
	var got []string
	for {
		l, ok := cur.Next()
		if !ok {
			break
		}
		got = append(got, l)
	}
	if cur.Err() != nil || len(got) != 3 || got[1] != long {
		t.Errorf("%d lines (%v), the long one whole: %v", len(got), cur.Err(), len(got) > 1 && got[1] == long)
	}
}
