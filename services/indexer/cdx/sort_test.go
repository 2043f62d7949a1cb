package cdx_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/indexer/cdx"
)

// TestWriteSortedIsByteOrder: small inputs (one run) and large ones (runs
// sorted in parallel and merged) come out in byte order, every line once
// per occurrence, as LC_ALL=C sort writes them.
func TestWriteSortedIsByteOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{0, 1, 7, 1000, 100_003} {
		lines := make([]string, n)
		for i := range lines {
			// Shared prefixes, duplicates and bytes above 0x7f.
			lines[i] = fmt.Sprintf("com,site%d)/p/%d\xc3\xa9 %d", rng.IntN(50), rng.IntN(n/3+1), rng.IntN(3))
		}
		want := slices.Sorted(slices.Values(lines))
		var out bytes.Buffer
		if err := cdx.WriteSorted(&out, slices.Clone(lines)); err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if n == 0 {
			got = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d lines: output is not the byte-order sort of the input", n)
		}
	}
}

// A Sorter that spills to disk writes the same bytes as sorting in memory.
func TestSorterSpillsAndMergesLikeSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []string
	s := &cdx.Sorter{Dir: t.TempDir(), SpillBytes: 4 << 10}
	for i := range 5000 {
		l := fmt.Sprintf("com,example)/%d %d", rng.IntN(1000), i%7)
		lines = append(lines, l)
		if err := s.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	if s.Runs() < 10 {
		t.Fatalf("only %d runs spilled", s.Runs())
	}
	var got, want bytes.Buffer
	if _, err := s.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if err := cdx.WriteSorted(&want, lines); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatal("spilled sort differs from the in-memory sort")
	}
}
