// Package cdxindex is the aggregator's index: k-way merging of sorted CDX
// files into one (identical lines kept once) with a bounded fan-in, and
// ZipNum clusters, written from a merge and queried from their summary.
package cdxindex

import (
	"bufio"
	"bytes"
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

// cursors is a min-heap of cursors by line, then source (the order a
// merge writes them), with the sift written out: no interface call per
// comparison, which container/heap makes.
type cursors []*cursor

func (c *cursor) before(d *cursor) bool {
	if x := bytes.Compare(c.line, d.line); x != 0 {
		return x < 0
	}
	return c.src < d.src
}

// init orders h as a heap.
func (h cursors) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down sifts h[i] down to its place.
func (h cursors) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// pop drops the first cursor.
func (h *cursors) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
}

func (c *cursor) next() (bool, error) {
	for c.sc.Scan() {
		l := c.sc.Bytes()
		if len(l) == 0 || bytes.HasPrefix(l, []byte(" CDX ")) {
			continue
		}
		c.line = l // valid until this cursor's next Scan, after it is written
		return true, nil
	}
	return false, c.sc.Err()
}

// Merge writes the lines of sorted CDX sources to dst in byte order (as
// `LC_ALL=C sort -m` would), with one header line first and identical lines
// written once. It returns how many lines it wrote.
func Merge(dst io.Writer, srcs ...io.Reader) (int64, error) {
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
	h.init()
	// The output is gathered in out and written 1 MiB at a time; the last
	// line written, which a duplicate is compared with, is a part of out
	// (a flush comes only after that comparison).
	out := make([]byte, 0, 1<<20)
	out = append(out, Header+"\n"...)
	var n int64
	var last []byte
	for len(h) > 0 {
		c := h[0]
		if n == 0 || !bytes.Equal(c.line, last) {
			if len(out)+len(c.line)+1 > cap(out) && len(out) > 0 {
				if _, err := dst.Write(out); err != nil {
					return n, err
				}
				out = out[:0]
			}
			at := len(out)
			out = append(append(out, c.line...), '\n')
			last = out[at : len(out)-1]
			n++
		}
		ok, err := c.next()
		if err != nil {
			return n, fmt.Errorf("source %d: %w", c.src, err)
		}
		if ok {
			h.down(0)
		} else {
			h.pop()
		}
	}
	if len(out) > 0 {
		if _, err := dst.Write(out); err != nil {
			return n, err
		}
	}
	return n, nil
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
