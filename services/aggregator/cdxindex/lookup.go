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

// Find returns the lines the query selects, in file order.
func (f *File) Find(q Query) ([]string, error) {
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
	sc.Buffer(make([]byte, 64<<10), 1<<24)
	var out []string
	for sc.Scan() {
		line := sc.Text()
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
		out = append(out, line)
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read index: %w", err)
	}
	return out, nil
}
