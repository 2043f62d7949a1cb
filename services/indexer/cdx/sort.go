package cdx

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
)

// parallelSortMin is the number of lines from which WriteSorted sorts in
// parallel; below it one goroutine is faster than the hand-off.
const parallelSortMin = 1 << 15

// WriteSorted sorts lines in byte order (as `LC_ALL=C sort`) and writes
// them to w, one per line. It sorts lines in place: large inputs as one run
// per CPU, sorted in parallel and merged while writing (as GNU sort does
// with its threads).
func WriteSorted(w io.Writer, lines []string) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	runs := sortRuns(lines, runtime.GOMAXPROCS(0))
	// Merge the runs: a linear scan of their heads (a handful of them).
	for {
		best := -1
		for i, r := range runs {
			if len(r) > 0 && (best < 0 || r[0] < runs[best][0]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		bw.WriteString(runs[best][0])
		bw.WriteByte('\n')
		runs[best] = runs[best][1:]
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write sorted CDX: %w", err)
	}
	return nil
}

// sortRuns splits lines into at most n runs and sorts them concurrently.
func sortRuns(lines []string, n int) [][]string {
	if len(lines) < parallelSortMin || n < 2 {
		slices.Sort(lines)
		return [][]string{lines}
	}
	size := (len(lines) + n - 1) / n
	var runs [][]string
	for start := 0; start < len(lines); start += size {
		runs = append(runs, lines[start:min(start+size, len(lines))])
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); slices.Sort(r) }()
	}
	wg.Wait()
	return runs
}
