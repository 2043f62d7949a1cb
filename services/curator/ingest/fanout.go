package ingest

import (
	"io"
	"sync"
)

// fanout writes each chunk to every writer at once, one goroutine each, and
// returns once all have it: the file, its sha256 and the manifest's digest
// are computed side by side instead of one after another, so a download
// is not held to the speed of the slowest hash.
type fanout struct {
	ws   []io.Writer
	in   []chan []byte
	wg   sync.WaitGroup
	errs []error
}

func newFanout(ws ...io.Writer) *fanout {
	f := &fanout{ws: ws, errs: make([]error, len(ws))}
	for i := 1; i < len(ws); i++ {
		ch := make(chan []byte)
		f.in = append(f.in, ch)
		go func() {
			for p := range ch {
				if f.errs[i] == nil {
					_, f.errs[i] = f.ws[i].Write(p)
				}
				f.wg.Done()
			}
		}()
	}
	return f
}

func (f *fanout) Write(p []byte) (int, error) {
	f.wg.Add(len(f.in))
	for _, ch := range f.in {
		ch <- p
	}
	_, err := f.ws[0].Write(p)
	f.wg.Wait()
	if err != nil {
		return 0, err
	}
	for _, e := range f.errs {
		if e != nil {
			return 0, e
		}
	}
	return len(p), nil
}

// Close stops the writers' goroutines.
func (f *fanout) Close() {
	for _, ch := range f.in {
		close(ch)
	}
}
