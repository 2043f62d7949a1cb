// Package cdxindex is the aggregator's index: k-way merging of sorted CDX
// files into one (identical lines kept once) with a bounded fan-in, and
// ZipNum clusters, written from a merge and queried from their summary.
package cdxindex

import (
	"bufio"
	"bytes"
	"container/heap"
	"fmt"
	"io"
	"os"
)

// Header is the CDX11 header line; it sorts before every line.
const Header = " CDX N b a m s k r M S V g"

type cursor struct {
	sc   *bufio.Scanner
	line []byte
	src  int
}

type cursors []*cursor

func (c cursors) Len() int { return len(c) }
func (c cursors) Less(i, j int) bool {
	if d := bytes.Compare(c[i].line, c[j].line); d != 0 {
		return d < 0
	}
	return c[i].src < c[j].src
}
func (c cursors) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *cursors) Push(x any)   { *c = append(*c, x.(*cursor)) }
func (c *cursors) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// next advances a cursor past header and empty lines; false at the end.
func (c *cursor) next() (bool, error) {
	for c.sc.Scan() {
		l := c.sc.Bytes()
		if len(l) == 0 || bytes.HasPrefix(l, []byte(" CDX ")) {
			continue
		}
		c.line = append(c.line[:0], l...)
		return true, nil
	}
	return false, c.sc.Err()
}

// Merge writes the lines of sorted CDX sources to dst in byte order (as
// `LC_ALL=C sort -m` would), with one header line first and identical lines
// written once. It returns how many lines it wrote.
func Merge(dst io.Writer, srcs ...io.Reader) (int64, error) {
	w := bufio.NewWriterSize(dst, 1<<20)
	h := make(cursors, 0, len(srcs))
	for i, r := range srcs {
		sc := bufio.NewScanner(r)
		// 64 KiB to start, grown for a longer line (up to 16 MiB): a
		// buffer per source is the merge's memory.
		sc.Buffer(make([]byte, 64<<10), 1<<24)
		c := &cursor{sc: sc, src: i}
		ok, err := c.next()
		if err != nil {
			return 0, fmt.Errorf("source %d: %w", i, err)
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	if _, err := w.WriteString(Header + "\n"); err != nil {
		return 0, err
	}
	var n int64
	var last []byte
	for h.Len() > 0 {
		c := h[0]
		if last == nil || !bytes.Equal(c.line, last) {
			w.Write(c.line)
			w.WriteByte('\n')
			last = append(last[:0], c.line...)
			n++
		}
		ok, err := c.next()
		if err != nil {
			return n, fmt.Errorf("source %d: %w", c.src, err)
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return n, w.Flush()
}

// DefaultFanIn is how many sources MergeBounded reads at once.
const DefaultFanIn = 64

// MergeBounded is Merge over n sources, reading at most fanIn of them at
// once, whatever n: sources beyond the fan-in are merged a group at a time
// into temporary files under tmpDir, which are merged in turn (fewer than
// two passes over the lines for up to fanIn² sources). Its memory is the
// fan-in's buffers, not the archive's: opening every output at once, with
// a buffer each, is what ran a 512 MiB aggregator out of memory at a few
// hundred outputs. open(i) opens source i; it is called once for each
// source, in order from 0 (so sources may be read from a list, one after
// the other), and each is closed once merged.
func MergeBounded(dst io.Writer, n, fanIn int, tmpDir string, open func(i int) (io.ReadCloser, error)) (int64, error) {
	if fanIn < 2 {
		fanIn = 2
	}
	if n <= fanIn {
		return mergeOpened(dst, n, open)
	}
	// A pass: each group of fanIn sources into one temporary file.
	var parts []string
	defer func() {
		for _, p := range parts {
			os.Remove(p)
		}
	}()
	for start := 0; start < n; start += fanIn {
		end := min(start+fanIn, n)
		f, err := os.CreateTemp(tmpDir, "merge-*.cdx")
		if err != nil {
			return 0, err
		}
		parts = append(parts, f.Name())
		_, err = mergeOpened(f, end-start, func(i int) (io.ReadCloser, error) { return open(start + i) })
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("merge sources %d to %d: %w", start, end-1, err)
		}
	}
	return MergeBounded(dst, len(parts), fanIn, tmpDir, func(i int) (io.ReadCloser, error) { return os.Open(parts[i]) })
}

// mergeOpened opens n sources, merges them into dst and closes them.
func mergeOpened(dst io.Writer, n int, open func(i int) (io.ReadCloser, error)) (int64, error) {
	readers := make([]io.Reader, 0, n)
	defer func() {
		for _, r := range readers {
			r.(io.Closer).Close()
		}
	}()
	for i := range n {
		rc, err := open(i)
		if err != nil {
			return 0, fmt.Errorf("open source %d: %w", i, err)
		}
		readers = append(readers, rc)
	}
	return Merge(dst, readers...)
}
