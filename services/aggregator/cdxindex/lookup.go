package cdxindex

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// File is a sorted CDX file read in place: a lookup reads a few blocks by
// binary search, then the matching lines, never the whole file.
type File struct {
	r    io.ReaderAt
	size int64
}

// Open wraps a sorted CDX file of size bytes.
func Open(r io.ReaderAt, size int64) *File { return &File{r: r, size: size} }

// Query selects lines by URL key.
type Query struct {
	// Key is the SURT key (exact), or key prefix (Prefix).
	Key string
	// Prefix matches every key that starts with Key.
	Prefix bool
	// From and To bound the timestamp (a prefix of 14 digits); empty is open.
	From, To string
	// Limit caps the lines returned (0: no cap).
	Limit int
}

// lineAt returns the line that starts at or after off (the first whole
// line), with its start; ok is false past the end.
func (f *File) lineAt(off int64) (line []byte, start int64, ok bool, err error) {
	buf := make([]byte, 4096)
	start = off
	if off > 0 {
		// Skip to the byte after the next newline at or after off-1.
		pos := off - 1
		for {
			n, rerr := f.r.ReadAt(buf, pos)
			if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
				start = pos + int64(i) + 1
				break
			}
			pos += int64(n)
			if rerr != nil {
				return nil, f.size, false, nil
			}
		}
	}
	if start >= f.size {
		return nil, start, false, nil
	}
	var out []byte
	pos := start
	for {
		n, rerr := f.r.ReadAt(buf, pos)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return append(out, buf[:i]...), start, true, nil
		}
		out = append(out, buf[:n]...)
		pos += int64(n)
		if rerr == io.EOF {
			return out, start, true, nil
		}
		if rerr != nil {
			return nil, start, false, rerr
		}
	}
}

// lowerBound is the offset of the first line that is >= key.
func (f *File) lowerBound(key []byte) (int64, error) {
	lo, hi := int64(0), f.size
	for lo < hi {
		mid := lo + (hi-lo)/2
		line, start, ok, err := f.lineAt(mid)
		if err != nil {
			return 0, err
		}
		if !ok || start >= hi {
			hi = mid
			continue
		}
		if bytes.Compare(line, key) < 0 {
			lo = start + int64(len(line)) + 1
		} else {
			hi = mid
		}
	}
	// lo is a line start or the end; step back to lo's line start.
	_, start, _, err := f.lineAt(lo)
	return start, err
}

// maxLine bounds a line read from an index (the indexer's lines are at
// most about 1 MiB).
const maxLine = 2 << 20

// Cursor reads the lines a query selects, in file order, one at a time:
// a query reads no more of the file than the lines it is asked for.
type Cursor struct {
	sc   *bufio.Scanner
	q    Query
	done bool
	err  error
}

// Cursor positions a cursor at the query's first line (q.Limit is not
// applied: the caller stops when it has enough).
func (f *File) Cursor(q Query) (*Cursor, error) {
	key := q.Key
	if !q.Prefix {
		key += " "
	}
	if q.From != "" && !q.Prefix {
		key += q.From
	}
	off, err := f.lowerBound([]byte(key))
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(io.NewSectionReader(f.r, off, f.size-off))
	sc.Buffer(make([]byte, 64<<10), maxLine)
	return &Cursor{sc: sc, q: q}, nil
}

// Next returns the next selected line; false at the end (see Err).
func (c *Cursor) Next() (string, bool) {
	q := c.q
	for !c.done && c.sc.Scan() {
		line := c.sc.Text()
		k, rest, _ := strings.Cut(line, " ")
		if q.Prefix && !strings.HasPrefix(k, q.Key) || !q.Prefix && k != q.Key {
			break
		}
		ts, _, _ := strings.Cut(rest, " ")
		if q.From != "" && ts < q.From {
			continue
		}
		if q.To != "" && ts > q.To && !strings.HasPrefix(ts, q.To) {
			if !q.Prefix {
				break // exact key: timestamps ascend
			}
			continue
		}
		return line, true
	}
	if !c.done {
		c.done = true
		if err := c.sc.Err(); err != nil {
			c.err = fmt.Errorf("read index: %w", err)
		}
	}
	return "", false
}

// Err is the error that ended the cursor, if any.
func (c *Cursor) Err() error { return c.err }

// Find returns the lines the query selects, in file order, at most
// q.Limit of them (0: all).
func (f *File) Find(q Query) ([]string, error) {
	c, err := f.Cursor(q)
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		line, ok := c.Next()
		if !ok {
			return out, c.Err()
		}
		out = append(out, line)
		if q.Limit > 0 && len(out) >= q.Limit {
			return out, nil
		}
	}
}
