package cdxindex_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// TestFindAgainstAScan compares lookups with a plain scan of the same lines.
func TestFindAgainstAScan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var lines []string
	for range 5000 {
		lines = append(lines, fmt.Sprintf("com,site%02d)/p%d %d http://x/ text/html 200 D - - 10 %d f.warc.gz",
			r.IntN(40), r.IntN(30), 20260101000000+r.IntN(100000), r.IntN(1000)))
	}
	content := sortedFile(lines)
	sort.Strings(lines)
	f := cdxindex.Open(strings.NewReader(content), int64(len(content)))
	for i := range 300 {
		q := cdxindex.Query{Key: fmt.Sprintf("com,site%02d)/p%d", r.IntN(45), r.IntN(35))}
		switch i % 4 {
		case 1:
			q.Prefix, q.Key = true, q.Key[:len(q.Key)-1]
		case 2:
			q.From, q.To = "202601010300", "202601010500"
		case 3:
			q.Limit = 3
		}
		got, err := f.Find(q)
		if err != nil {
			t.Fatal(err)
		}
		if want := scanLines(lines, q); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("query %+v: %d lines, want %d", q, len(got), len(want))
		}
	}
	if got, _ := f.Find(cdxindex.Query{Key: "zzz"}); len(got) != 0 {
		t.Errorf("past the end: %v", got)
	}
	if got, _ := f.Find(cdxindex.Query{Key: "aaa"}); len(got) != 0 {
		t.Errorf("before the start: %v", got)
	}
}
