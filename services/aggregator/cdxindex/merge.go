// Package cdxindex is the aggregator's index: k-way merging of sorted CDX
// files into one (identical lines kept once), and lookups in a sorted CDX
// file by binary search over its bytes, without loading it.
package cdxindex

import (
	"bufio"
	"bytes"
	"container/heap"
	"fmt"
	"io"
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
		sc.Buffer(make([]byte, 1<<20), 1<<24)
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
