package cdx

import (
	"bytes"
	"errors"
	"io"

	"github.com/klauspost/compress/gzip"

	"github.com/archivist/archivist/services/indexer/warc"
)

// MinSpan is the least a span of a parallel index covers: below it the
// cost of finding a span's start outweighs the gain.
const MinSpan = 4 << 20

// MaxSpan bounds a span, and so the entries held while earlier spans are
// still being read.
const MaxSpan = 64 << 20

// scanLimit is how far past a span's nominal start a member start is
// looked for before the span is left to the one before.
const scanLimit = 16 << 20

// IndexAt is Index over an archive it can read at offsets (a file, a
// local blob), on up to workers cores. A gzipped WARC's records are gzip
// members of their own, independent of each other: the file is cut into
// spans, each starting at the first member start found after its nominal
// start (a gzip header whose member inflates to "WARC/"), and the spans
// are indexed at once, their entries given to fn in file order. A span
// reads on until a record starts at or past the next span's nominal
// start; that record must be the one the next span found, or the next
// spans' work is dropped and this span's reader goes on alone. So the
// entries, and a fault's place, are always those of a sequential read;
// only the time differs. Other files (plain, ARC, small) are read
// sequentially.
func IndexAt(ra io.ReaderAt, size int64, filename string, workers int, fn func(Entry) error) (int, error) {
	var magic [2]byte
	if n, _ := ra.ReadAt(magic[:], 0); workers < 2 || size < 2*MinSpan || n < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return Index(io.NewSectionReader(ra, 0, size), filename, fn)
	}
	span := min(max(size/int64(workers*8), MinSpan), MaxSpan)
	var bounds []int64 // nominal span starts after the first
	for t := span; t < size; t += span {
		bounds = append(bounds, t)
	}
	p := &parallel{ra: ra, size: size, filename: filename, bounds: bounds}
	// Spans are read workers at a time and given in order; up to four
	// times as many are started ahead, so a core never waits for the
	// slowest span before it (at most that many spans' entries are held).
	results := make([]chan spanResult, len(bounds)+1)
	sem := make(chan struct{}, workers)
	launch := func(k int) {
		results[k] = make(chan spanResult, 1)
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[k] <- p.readSpan(k)
		}()
	}
	next := 0
	for ; next < len(results) && next < 4*workers; next++ {
		launch(next)
	}
	n := 0
	var want int64 // where span k must start: where span k-1 stopped
	for k := 0; k < len(results); k++ {
		r := <-results[k]
		if next < len(results) {
			launch(next)
			next++
		}
		if k > 0 && (r.start != want || r.start < 0) {
			// A wrong or missing guess: the rest is read on from where
			// the last good span stopped, in one reader.
			drain(results[k+1 : next])
			m, err := p.sequential(want, fn)
			return n + m, err
		}
		for _, e := range r.entries {
			if err := fn(e); err != nil {
				drain(results[k+1 : next])
				return n, err
			}
			n++
		}
		if r.err != nil {
			drain(results[k+1 : next])
			return n, r.err
		}
		want = r.stop
		if want >= size {
			drain(results[k+1 : next])
			return n, nil
		}
	}
	return n, nil
}

// drain waits for spans started and drops their work.
func drain(rs []chan spanResult) {
	for _, r := range rs {
		<-r
	}
}

type parallel struct {
	ra       io.ReaderAt
	size     int64
	filename string
	bounds   []int64
}

// spanResult is a span's work: where it started (-1: no member start
// found), its entries, where it stopped (the offset of the first record at
// or past the next span's nominal start, or the file's end) and the fault
// that ended it, if any.
type spanResult struct {
	start, stop int64
	entries     []Entry
	err         error
}

// readSpan indexes span k.
func (p *parallel) readSpan(k int) spanResult {
	start := int64(0)
	if k > 0 {
		start = p.memberStart(p.bounds[k-1])
		if start < 0 {
			return spanResult{start: -1}
		}
	}
	end := p.size
	if k < len(p.bounds) {
		end = p.bounds[k]
	}
	r := spanResult{start: start, stop: p.size}
	rd, err := warc.NewReaderOptions(io.NewSectionReader(p.ra, start, p.size-start), warc.Options{Digest: PayloadStart})
	if err != nil {
		r.err = err
		return r
	}
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			var fe *warc.FormatError
			if errors.As(err, &fe) {
				fe.Offset += start
			}
			r.err = err
			return r
		}
		if off := start + rec.Offset; off >= end {
			r.stop = off
			return r
		}
		if e, ok := FromRecord(rec, p.filename); ok {
			e.Offset += start
			r.entries = append(r.entries, e)
		}
	}
}

// sequential indexes from offset from to the end in one reader.
func (p *parallel) sequential(from int64, fn func(Entry) error) (int, error) {
	n := 0
	_, err := Index(io.NewSectionReader(p.ra, from, p.size-from), p.filename, func(e Entry) error {
		e.Offset += from
		n++
		return fn(e)
	})
	var fe *warc.FormatError
	if errors.As(err, &fe) {
		fe.Offset += from
	}
	return n, err
}

// memberStart is the first offset at or after t where a gzip member starts
// that inflates to a WARC record ("WARC/"), or -1 within scanLimit.
func (p *parallel) memberStart(t int64) int64 {
	buf := make([]byte, 256<<10)
	for pos := t; pos < p.size && pos < t+scanLimit; {
		n, err := p.ra.ReadAt(buf, pos)
		if n < 4 {
			return -1
		}
		for i := 0; i+3 < n; i++ {
			if buf[i] != 0x1f || buf[i+1] != 0x8b || buf[i+2] != 8 || buf[i+3]&0xe0 != 0 {
				continue
			}
			if p.inflatesToWARC(pos + int64(i)) {
				return pos + int64(i)
			}
		}
		if err != nil {
			return -1
		}
		pos += int64(n - 3) // a header may straddle the read
	}
	return -1
}

// inflatesToWARC reports whether a gzip member at off begins a WARC record.
func (p *parallel) inflatesToWARC(off int64) bool {
	zr, err := gzip.NewReader(io.NewSectionReader(p.ra, off, p.size-off))
	if err != nil {
		return false
	}
	zr.Multistream(false)
	head := make([]byte, 8)
	if _, err := io.ReadFull(zr, head); err != nil {
		return false
	}
	return bytes.HasPrefix(head, []byte("WARC/1."))
}
