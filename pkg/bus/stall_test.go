package bus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// TestStallTimeoutKeepsAProgressingHandler: under a handler timeout a
// handler that needs longer than it (an audit read of a large object)
// has its context ended and its message redelivered, for ever. Under a
// stall timeout, a handler that reports progress keeps its message (one
// delivery, acked, past several ack waits) for as long as it needs; one
// that stalls has its context ended after the stall timeout.
func TestStallTimeoutKeepsAProgressingHandler(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	run := func(name string, opt bus.ConsumeOption, progress bool) (calls int32, ended bool) {
		t.Helper()
		var n, finished atomic.Int32
		var cut atomic.Bool
		c := testConsumer(name, 300*time.Millisecond, 5)
		c.Config.FilterSubject = "testwq." + name
		sub, err := bus.Consume(ctx, b, c, func(hctx context.Context, _ *bus.Message[events.EpisodeUpserted]) error {
			n.Add(1)
			defer finished.Add(1)
			// 1.5 s of work in 30 steps: five ack waits, three stall
			// or handler timeouts.
			for range 30 {
				select {
				case <-hctx.Done():
					cut.Store(true)
					return hctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
				if progress {
					bus.Progress(hctx)
				}
			}
			return nil
		}, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer stop(t, sub)
		publish(t, b, "testwq."+name, episode(1))
		waitFor(t, 20*time.Second, name+" handled", func() bool { return finished.Load() >= 1 })
		time.Sleep(500 * time.Millisecond) // any redelivery shows
		return n.Load(), cut.Load()
	}
	if calls, cut := run("progressing", bus.WithStallTimeout(500*time.Millisecond), true); calls != 1 || cut {
		t.Errorf("a handler reporting progress under a 500 ms stall timeout: %d deliveries, context ended %v; want 1, not ended", calls, cut)
	}
	if _, cut := run("stalling", bus.WithStallTimeout(500*time.Millisecond), false); !cut {
		t.Error("a handler without progress outlived its stall timeout")
	}
	if _, cut := run("total", bus.WithHandlerTimeout(500*time.Millisecond), true); !cut {
		t.Error("progress extended a handler timeout (a total bound)")
	}
}
