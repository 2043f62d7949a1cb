package fetch

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// teeChunk and teeChunks size the buffers in flight in teeCopy: enough for
// the reader to run ahead of the slowest writer by a few megabytes.
const (
	teeChunk  = 256 << 10
	teeChunks = 12
)

// teeCopy copies src to every writer (the file, its sha256, the manifest's
// digest) as a pipeline: one goroutine reads into a ring of buffers while
// one goroutine per writer consumes them in order, so receiving, writing
// and each hash run side by side and the copy goes at the pace of the
// slowest of them alone, not of their sum. It returns the bytes read and
// the first error of the reader or any writer.
func teeCopy(src io.Reader, ws ...io.Writer) (int64, error) {
	// The first chunk is read before anything starts: a small file (most
	// of them) fits in it and is written and hashed right here.
	first := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(first)
	m, err := io.ReadFull(src, *first)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		for _, w := range ws {
			if _, err := w.Write((*first)[:m]); err != nil {
				return int64(m), err
			}
		}
		return int64(m), nil
	}
	if err != nil {
		return int64(m), err
	}
	type chunk struct {
		b    *[]byte
		n    int
		refs atomic.Int32
	}
	// free holds the chunks the writers are done with; more are taken from
	// the pool until teeChunks are in flight.
	free := make(chan *chunk, teeChunks)
	made := 1
	var (
		failed atomic.Bool
		wg     sync.WaitGroup
		errs   = make([]error, len(ws))
		ins    = make([]chan *chunk, len(ws))
		all    []*chunk
	)
	for i, w := range ws {
		ins[i] = make(chan *chunk, teeChunks)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range ins[i] {
				if errs[i] == nil {
					if _, errs[i] = w.Write((*c.b)[:c.n]); errs[i] != nil {
						failed.Store(true)
					}
				}
				if c.refs.Add(-1) == 0 {
					free <- c
				}
			}
		}()
	}
	send := func(c *chunk) {
		c.refs.Store(int32(len(ws)))
		for _, in := range ins {
			in <- c
		}
	}
	c := &chunk{b: first, n: m}
	all = append(all, c)
	n := int64(m)
	send(c)
	var rerr error
	for !failed.Load() {
		var c *chunk
		select {
		case c = <-free:
		default:
			if made < teeChunks {
				made++
				c = &chunk{b: chunkPool.Get().(*[]byte)}
				all = append(all, c)
			} else {
				c = <-free
			}
		}
		m, err := io.ReadFull(src, *c.b)
		if m > 0 {
			n += int64(m)
			c.n = m
			send(c)
		} else {
			free <- c
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	for _, in := range ins {
		close(in)
	}
	wg.Wait()
	for _, c := range all[1:] {
		chunkPool.Put(c.b)
	}
	return n, errors.Join(append([]error{rerr}, errs...)...)
}

// chunkPool keeps teeCopy's buffers between downloads.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, teeChunk); return &b }}
