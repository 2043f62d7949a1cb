package cdxindex_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

func sortedFile(lines []string) string {
	sort.Strings(lines)
	return cdxindex.Header + "\n" + strings.Join(lines, "\n") + "\n"
}

func TestMergeSortsAndDeduplicates(t *testing.T) {
	a := sortedFile([]string{"com,b)/ 2 x", "com,a)/ 1 x", "org,z)/ 9 x"})
	b := sortedFile([]string{"com,a)/ 1 x", "com,c)/ 3 x"}) // one line also in a
	c := sortedFile(nil)
	var out bytes.Buffer
	n, err := cdxindex.Merge(&out, strings.NewReader(a), strings.NewReader(b), strings.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	want := sortedFile([]string{"com,a)/ 1 x", "com,b)/ 2 x", "com,c)/ 3 x", "org,z)/ 9 x"})
	if out.String() != want || n != 4 {
		t.Errorf("merged (%d lines):\n%s\nwant\n%s", n, out.String(), want)
	}
}

// TestMergeMatchesSortM: on random sorted files, Merge equals
// `LC_ALL=C sort -m -u` of the same files (more than the 1 MiB Merge
// writes at a time, so that a duplicate is compared across a write).
func TestMergeMatchesSortM(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var paths []string
	var readers []io.Reader
	for f := range 5 {
		var lines []string
		for range 8000 {
			lines = append(lines, fmt.Sprintf("com,site%d)/page/%d 2026%010d {\"k\": %d}", r.IntN(50), r.IntN(100), r.IntN(300), r.IntN(3)))
		}
		p := filepath.Join(dir, fmt.Sprintf("%d.cdx", f))
		os.WriteFile(p, []byte(sortedFile(lines)), 0o644)
		paths = append(paths, p)
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		readers = append(readers, fh)
	}
	var out bytes.Buffer
	n, err := cdxindex.Merge(&out, readers...)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sort", append([]string{"-m", "-u"}, paths...)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	want, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if out.Len() < 1<<20 || n >= int64(len(paths)*8000) {
		t.Fatalf("%d lines, %d bytes merged: the test wants more than one write and some duplicates", n, out.Len())
	}
	// sort keeps one header line too (identical lines are merged).
	if out.String() != string(want) {
		t.Errorf("Merge differs from sort -m -u (%d vs %d bytes)", out.Len(), len(want))
	}
}

// TestMergeBoundedEqualsMerge: merging many sources a fan-in at a time,
// through temporary files and passes, writes what one merge of them all
// writes (lines in order, duplicates across groups once), and never holds
// more than the fan-in open.
func TestMergeBoundedEqualsMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const n = 50
	srcs := make([]string, n)
	for i := range srcs {
		var lines []string
		for range r.IntN(20) {
			lines = append(lines, fmt.Sprintf("com,h%d)/p%d %d x", r.IntN(30), r.IntN(10), r.IntN(3)))
		}
		srcs[i] = sortedFile(lines)
	}
	var want bytes.Buffer
	readers := make([]io.Reader, n)
	for i, s := range srcs {
		readers[i] = strings.NewReader(s)
	}
	wantN, err := cdxindex.Merge(&want, readers...)
	if err != nil {
		t.Fatal(err)
	}
	for _, fanIn := range []int{2, 3, 7, 64} {
		open, most := 0, 0
		var got bytes.Buffer
		gotN, err := cdxindex.MergeBounded(&got, n, fanIn, t.TempDir(), func(i int) (io.ReadCloser, error) {
			open++
			most = max(most, open)
			return closer{strings.NewReader(srcs[i]), func() { open-- }}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() || gotN != wantN {
			t.Errorf("fan-in %d: %d lines, want %d; equal %v", fanIn, gotN, wantN, got.String() == want.String())
		}
		if most > fanIn || open != 0 {
			t.Errorf("fan-in %d: %d sources open at once, %d left open", fanIn, most, open)
		}
	}
}

type closer struct {
	io.Reader
	close func()
}

func (c closer) Close() error { c.close(); return nil }
