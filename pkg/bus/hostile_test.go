package bus_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

func TestPanickingHandlerDeadLettersAndKeepsConsuming(t *testing.T) {
	b := setup(t)
	c := testConsumer("panics", 5*time.Second, 5)
	var calls, good atomic.Int32
	sub, err := bus.Consume(context.Background(), b, c, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		calls.Add(1)
		if m.Event.ID == "ep-0001" {
			var p *events.Envelope
			_ = p.ID // nil dereference: the handler's bug, triggered by this input
		}
		good.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	publish(t, b, testSubject, episode(1))
	publish(t, b, testSubject, episode(2))
	dl := deadLetters(t, b, 1)[0]
	if got := dl.Header.Get(events.HeaderDLQReason); !strings.Contains(got, "handler panicked") || !strings.Contains(got, "nil pointer") {
		t.Errorf("reason %q does not say the handler panicked and why", got)
	}
	waitFor(t, 5*time.Second, "the other message handled", func() bool { return good.Load() == 1 })
	if n := calls.Load(); n != 2 {
		t.Errorf("handler called %d times, want 2 (the panic is not retried)", n)
	}
}

// The 14-byte msgpack bomb, sent over NATS: dead-lettered as
// breaking a bound, and the consumer goes on.
func TestMsgpackBombOverNATSIsDeadLetteredNamingTheBound(t *testing.T) {
	b := setup(t)
	c := testConsumer("bomb", 5*time.Second, 5)
	var calls atomic.Int32
	sub, err := bus.Consume(context.Background(), b, c, func(context.Context, *bus.Message[events.EpisodeUpserted]) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	m := nats.NewMsg(testSubject)
	m.Data = append(append([]byte{0x81, 0xa7}, "same_as"...), 0xdd, 0xff, 0xff, 0xff, 0xff)
	if _, err := b.JetStream().PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	publish(t, b, testSubject, episode(5))
	dl := deadLetters(t, b, 1)[0]
	if got := dl.Header.Get(events.HeaderDLQReason); !strings.Contains(got, "msgpack array or map length 4294967295 exceeds the limit") {
		t.Errorf("reason %q does not name the bound", got)
	}
	waitFor(t, 5*time.Second, "the good message handled", func() bool { return calls.Load() == 1 })
}

// A handler that hangs past its timeout, ignoring its context, is no longer
// kept in progress: JetStream redelivers the message, each delivery counts,
// and after MaxDeliver it is dead-lettered instead of wedging the consumer.
func TestHangingHandlerIsRedeliveredAndParked(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	mover, err := b.StartDeadLetterMover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, mover)
	c := testConsumer("hangs", 500*time.Millisecond, 2)
	var calls atomic.Int32
	release := make(chan struct{})
	sub, err := bus.Consume(ctx, b, c, func(hctx context.Context, _ *bus.Message[events.EpisodeUpserted]) error {
		calls.Add(1)
		<-release // ignores hctx: a hang
		return nil
	}, bus.WithConcurrency(4), bus.WithHandlerTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); stop(t, sub) }()
	publish(t, b, testSubject, episode(6))
	dl := deadLetters(t, b, 1)[0]
	if got := dl.Header.Get(events.HeaderDLQReason); !strings.Contains(got, "max deliveries") {
		t.Errorf("reason %q", got)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("handler called %d times, want 2", n)
	}
}
