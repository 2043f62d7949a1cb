package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// TestCrashesSpendTheDeliveriesOfFewMessages: a worker that crashes (its
// connection gone, nothing given back) costs a delivery to every message
// its client had pulled, handled or not. The client pulled 500 at a time:
// a service killed a few times while it had a backlog dead-lettered
// messages it never handled (the 30-minute soak lost 360 records of the
// auditor's so). It now pulls a few per handler, so a crash spends the
// deliveries of about as many messages as the handlers could have taken,
// and a backlog worked by a worker crashing again and again is handled
// whole, none dead-lettered.
func TestCrashesSpendTheDeliveriesOfFewMessages(t *testing.T) {
	ctx := context.Background()
	url := testenv.NATS(t)
	first := testenv.BusAt(t, url, "bus-test")
	if _, err := first.JetStream().CreateOrUpdateStream(ctx, testStream); err != nil {
		t.Fatal(err)
	}
	const total = 300
	batch := make([]bus.Outgoing, total)
	for i := range batch {
		env, _ := events.New("bus-test", episode(i))
		batch[i] = bus.Outgoing{Subject: testSubject, Envelope: env}
	}
	if err := first.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	c := testConsumer("crashing", time.Second, 3)
	var mu sync.Mutex
	seen := map[string]bool{}
	handler := func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		seen[m.Event.ID] = true
		mu.Unlock()
		return nil
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	// Three short lives, each ended by a crash once a few messages are
	// handled; the next life starts once the ack wait has run out on what
	// the last one held.
	for life := range 3 {
		b := testenv.BusAt(t, url, "bus-test")
		if _, err := bus.Consume(ctx, b, c, handler); err != nil {
			t.Fatal(err)
		}
		before := count()
		waitFor(t, 10*time.Second, "a few messages handled", func() bool { return count() >= before+20 })
		b.Conn().Close() // the crash: nothing acked or given back
		t.Logf("life %d: %d handled", life, count())
		time.Sleep(1500 * time.Millisecond)
	}
	last := testenv.BusAt(t, url, "bus-test")
	sub, err := bus.Consume(ctx, last, c, handler, bus.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	deadline := time.Now().Add(20 * time.Second)
	for count() < total && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(); n != total {
		t.Errorf("%d of %d messages handled: the crashes spent the deliveries of the others, never handled", n, total)
	}
}
