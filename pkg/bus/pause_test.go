package bus_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// dependency is a stand-in for PostgreSQL: up or down.
type dependency struct{ down atomic.Bool }

func (d *dependency) check(context.Context) error {
	if d.down.Load() {
		return errors.New("connect: connection refused")
	}
	return nil
}

// TestOutagePausesInsteadOfSpendingDeliveries: while the handlers'
// dependency is down their failures spend no deliveries: the consumer
// pauses, the messages in hand wait, and once it is back every message is
// handled on its first delivery, nothing dead-lettered, for an outage far
// longer than MaxDeliver quick retries would survive.
func TestOutagePausesInsteadOfSpendingDeliveries(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []bus.ConsumeOption
	}{{"concurrent", []bus.ConsumeOption{bus.WithConcurrency(4)}}, {"one-at-a-time", []bus.ConsumeOption{bus.WithOneAtATime()}}} {
		t.Run(mode.name, func(t *testing.T) {
			dep := &dependency{}
			b := testenv.Bus(t, "bus-test", bus.WithDependencyCheck(dep.check))
			if _, err := b.JetStream().CreateOrUpdateStream(context.Background(), testStream); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			mover, err := b.StartDeadLetterMover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer stop(t, mover)
			c := testConsumer("outage-"+mode.name, 2*time.Second, 3)
			var mu sync.Mutex
			handled := map[string]uint64{} // id -> delivery it succeeded on
			var failures atomic.Int32
			opts := append([]bus.ConsumeOption{bus.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond)}, mode.opts...)
			sub, err := bus.Consume(ctx, b, c, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
				if dep.down.Load() {
					failures.Add(1)
					return errors.New("query: connection refused")
				}
				mu.Lock()
				handled[m.Event.ID] = m.Metadata.NumDelivered
				mu.Unlock()
				return nil
			}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer stop(t, sub)

			dep.down.Store(true)
			for i := range 10 {
				publish(t, b, testSubject, episode(100+i))
			}
			waitFor(t, 5*time.Second, "the consumer to pause", func() bool { return failures.Load() > 0 && sub.Paused() })
			time.Sleep(5 * time.Second) // 2.5 ack waits: MaxDeliver 3 would have been spent
			dep.down.Store(false)
			waitFor(t, 15*time.Second, "every message handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(handled) == 10
			})
			// Messages in hand or waiting for a worker spend no delivery; at
			// most those the client had buffered when consuming stopped
			// are redelivered once.
			mu.Lock()
			first := 0
			for id, d := range handled {
				if d == 1 {
					first++
				}
				if d > 2 {
					t.Errorf("%s handled on delivery %d", id, d)
				}
			}
			mu.Unlock()
			if first < 8 {
				t.Errorf("%d of 10 handled on their first delivery, want at least 8", first)
			}
			if sub.Paused() {
				t.Error("still paused")
			}
			st, _ := b.JetStream().Stream(ctx, events.StreamDeadLetter)
			if info, _ := st.Info(ctx); info.State.Msgs != 0 {
				t.Errorf("%d dead letters", info.State.Msgs)
			}
		})
	}
}
