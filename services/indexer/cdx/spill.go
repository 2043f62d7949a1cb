package cdx

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
)

// DefaultSpillBytes is how many bytes of lines a Sorter holds in memory
// before it writes them, sorted, to a temporary file.
const DefaultSpillBytes = 64 << 20

// maxLineBytes bounds a CDX line read back from a run (a URL of the
// reader's longest header line appears twice, escaped).
const maxLineBytes = 1 << 20

// Sorter sorts CDX lines of any number with bounded memory: it keeps up to
// SpillBytes of lines, then sorts them into a run in a temporary file under
// Dir, and at the end merges the runs (as `LC_ALL=C sort` does with
// --buffer-size). Identical lines are all kept.
type Sorter struct {
	// Dir holds the runs ("" is the system's temporary directory).
	Dir string
	// SpillBytes is the memory bound (DefaultSpillBytes if 0).
	SpillBytes int

	lines []string
	held  int
	runs  []*os.File
	n     int64
}

// Add adds a line (without newline).
func (s *Sorter) Add(line string) error {
	if len(line) > maxLineBytes {
		return fmt.Errorf("CDX line of %d bytes is beyond %d", len(line), maxLineBytes)
	}
	s.lines = append(s.lines, line)
	s.held += len(line) + 16
	s.n++
	limit := s.SpillBytes
	if limit <= 0 {
		limit = DefaultSpillBytes
	}
	if s.held >= limit {
		return s.spill()
	}
	return nil
}

// Lines is how many lines were added.
func (s *Sorter) Lines() int64 { return s.n }

// Runs is how many runs were spilled to disk.
func (s *Sorter) Runs() int { return len(s.runs) }

func (s *Sorter) spill() error {
	f, err := os.CreateTemp(s.Dir, "cdx-run-*")
	if err != nil {
		return fmt.Errorf("spill CDX lines: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: gone with the process, whatever happens
	s.runs = append(s.runs, f)
	if err := WriteSorted(f, s.lines); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spill CDX lines: %w", err)
	}
	clear(s.lines)
	s.lines, s.held = s.lines[:0], 0
	return nil
}

// WriteTo writes every line in byte order to w, one per line, and closes
// the runs.
func (s *Sorter) WriteTo(w io.Writer) (int64, error) {
	defer s.Close()
	if len(s.runs) == 0 {
		return s.n, WriteSorted(w, s.lines)
	}
	if len(s.lines) > 0 {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	h := make(runHeap, 0, len(s.runs))
	for _, f := range s.runs {
		sc := bufio.NewScanner(bufio.NewReaderSize(f, 256<<10))
		sc.Buffer(make([]byte, 64<<10), maxLineBytes+1)
		r := &run{sc: sc}
		if r.sc.Scan() {
			h = append(h, r)
		} else if err := r.sc.Err(); err != nil {
			return 0, fmt.Errorf("read CDX run: %w", err)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		r := h[0]
		bw.Write(r.sc.Bytes())
		bw.WriteByte('\n')
		if r.sc.Scan() {
			heap.Fix(&h, 0)
			continue
		}
		if err := r.sc.Err(); err != nil {
			return 0, fmt.Errorf("read CDX run: %w", err)
		}
		heap.Pop(&h)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write sorted CDX: %w", err)
	}
	return s.n, nil
}

// Close drops the runs.
func (s *Sorter) Close() error {
	var errs []error
	for _, f := range s.runs {
		errs = append(errs, f.Close())
	}
	s.runs, s.lines = nil, nil
	return errors.Join(errs...)
}

type run struct{ sc *bufio.Scanner }

type runHeap []*run

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return string(h[i].sc.Bytes()) < string(h[j].sc.Bytes()) }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*run)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
