package bus_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// TestReapplyHandsOverWhatTheConsumerTakes: after a consumer acknowledged
// a stream's messages, Reapply hands them over again from a sequence, in
// order, only those of the consumer's subject, counting the undecodable
// and those the stream no longer holds; the ack floor is where the
// consumer's last acknowledged message is; a handler's error stops it.
func TestReapplyHandsOverWhatTheConsumerTakes(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if _, err := b.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "TESTLOG", Subjects: []string{"testlog.>"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	seqOf := map[int]uint64{} // episode i's on testlog.a
	var last uint64
	for i := range 10 {
		publish(t, b, "testlog.a", episode(i))
		ack, err := b.Publish(ctx, "testlog.b", mustEnvelope(t, episode(100+i)))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
		seqOf[i] = ack.Sequence - 1
		if i == 6 {
			if _, err := b.JetStream().Publish(ctx, "testlog.a", []byte("not an event")); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := events.Consumer{Stream: "TESTLOG", Config: jetstream.ConsumerConfig{Durable: "log-a", FilterSubject: "testlog.a",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second, MaxDeliver: 3}}
	var mu sync.Mutex
	var consumed []string
	sub, err := bus.Consume(ctx, b, c, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		mu.Lock()
		defer mu.Unlock()
		consumed = append(consumed, m.Event.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	var floor uint64
	waitFor(t, 10*time.Second, "the consumer acknowledges every message it takes", func() bool {
		floor, err = sub.AckFloor(ctx)
		return err == nil && floor == last-1 // the last a, before the last b
	})

	var got []string
	var seqs []uint64
	h := func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		got = append(got, m.Event.ID)
		seqs = append(seqs, m.Metadata.Sequence.Stream)
		if !strings.HasPrefix(m.Subject, "testlog.a") {
			t.Errorf("%s handed over: not the consumer's subject", m.Subject)
		}
		return nil
	}
	from := seqOf[5]
	r, err := bus.Reapply(ctx, b, c, from, h)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{episode(5).ID, episode(6).ID, episode(7).ID, episode(8).ID, episode(9).ID}
	if !slices.Equal(got, want) || r.Handled != 5 || r.Undecodable != 1 || r.Lost != 0 || r.From != from || r.To != last {
		t.Errorf("reapplied from %d: %v %+v; want %v, 5 handled, 1 undecodable, to %d", from, got, r, want, last)
	}
	if !slices.IsSorted(seqs) || seqs[0] != from {
		t.Errorf("sequences handed over %v: want in order from %d", seqs, from)
	}

	// The stream has aged its first messages out: they are counted lost.
	st, err := b.JetStream().Stream(ctx, "TESTLOG")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(from)); err != nil {
		t.Fatal(err)
	}
	got, seqs = nil, nil
	if r, err = bus.Reapply(ctx, b, c, 1, h); err != nil || r.Lost != from-1 || r.Handled != 5 {
		t.Errorf("reapplied from 1 after a purge to %d: %+v %v; want %d lost, 5 handled", from, r, err, from-1)
	}

	// Nothing past the end; a handler's error stops the reading.
	if r, err := bus.Reapply(ctx, b, c, last+1, h); err != nil || r.Handled != 0 {
		t.Errorf("reapplied past the end: %+v %v", r, err)
	}
	broken := errors.New("database down")
	r, err = bus.Reapply(ctx, b, c, from, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		if m.Event.ID == episode(7).ID {
			return broken
		}
		return nil
	})
	if !errors.Is(err, broken) || r.Handled != 2 {
		t.Errorf("a handler's error: %+v %v; want it returned after 2 handled", r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(consumed) != 10 {
		t.Errorf("the consumer took %d events, want 10", len(consumed))
	}
}

// mustEnvelope is e in an envelope of the test's producer.
func mustEnvelope(t *testing.T, e events.Event) events.Envelope {
	t.Helper()
	env, err := events.New("bus-test", e)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
