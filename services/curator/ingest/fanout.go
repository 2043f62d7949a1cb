package ingest

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
	type chunk struct {
		b    []byte
		refs atomic.Int32
	}
	free := make(chan *chunk, teeChunks)
	for range teeChunks {
		free <- &chunk{b: make([]byte, teeChunk)}
	}
	var (
		failed atomic.Bool
		wg     sync.WaitGroup
		errs   = make([]error, len(ws))
		ins    = make([]chan *chunk, len(ws))
	)
	for i, w := range ws {
		ins[i] = make(chan *chunk, teeChunks)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range ins[i] {
				if errs[i] == nil {
					if _, errs[i] = w.Write(c.b); errs[i] != nil {
						failed.Store(true)
					}
				}
				if c.refs.Add(-1) == 0 {
					free <- c
				}
			}
		}()
	}
	var n int64
	var rerr error
	for !failed.Load() {
		c := <-free
		m, err := io.ReadFull(src, c.b[:cap(c.b)])
		if m > 0 {
			n += int64(m)
			c.b = c.b[:m]
			c.refs.Store(int32(len(ws)))
			for _, in := range ins {
				in <- c
			}
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
	return n, errors.Join(append([]error{rerr}, errs...)...)
}
