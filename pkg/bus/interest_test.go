package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// TestAFullSourceIsRefusedNotDropped: CURATION's bound is on the events
// waiting for the curator. A source with its bound of events waiting has
// its next publish refused, and every event it had is still there; once
// the curator has taken some, the source publishes again. (Under limits
// retention the stream pushed out the oldest, never stored.)
func TestAFullSourceIsRefusedNotDropped(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "bus-test")
	var cfg jetstream.StreamConfig
	for _, s := range events.Streams(1) {
		if s.Name == events.StreamCuration {
			cfg = s
		}
	}
	// The same stream with a bound of 5, on subjects of its own.
	cfg.Name, cfg.Subjects, cfg.MaxMsgsPerSubject = "CURATION_BOUND_TEST", []string{"boundtest.>"}, 5
	st, err := b.JetStream().CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "curator", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(i int) error {
		_, err := b.JetStream().Publish(ctx, "boundtest.feed.episode.upserted", fmt.Appendf(nil, "event %d", i))
		return err
	}
	for i := range 5 {
		if err := publish(i); err != nil {
			t.Fatalf("event %d of 5: %v", i, err)
		}
	}
	if err = publish(5); !bus.IsFull(err) {
		t.Fatalf("the sixth event waiting: %v, want it refused as full (bus.IsFull)", err)
	}
	t.Logf("refused: %v", err)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "event 0" {
		t.Fatalf("the curator took %v, want the two oldest: nothing was pushed out", got)
	}
	if err := publish(5); err != nil {
		t.Fatalf("with two taken, the source publishes again: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 4 {
		t.Errorf("%d events kept, want the 4 not yet taken (taken ones go: interest retention)", info.State.Msgs)
	}
}

// TestCurationWaitsForACuratorThatHasNotStarted: the curator's consumers
// are made with the streams, so an event published before the curator
// first runs is kept for it (interest retention drops an event no
// consumer is interested in).
func TestCurationWaitsForACuratorThatHasNotStarted(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "bus-test")
	env, err := events.New("feed", &events.EpisodeUpserted{ID: "early", Source: "feed", Title: "before the curator"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, events.CurationSubject("feed", events.TypeEpisodeUpserted), env); err != nil {
		t.Fatal(err)
	}
	cons, err := b.JetStream().Consumer(ctx, events.StreamCuration, events.CuratorEpisodes.Config.Durable)
	if err != nil {
		t.Fatalf("the curator's consumer was not made with the stream: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 1 {
		t.Fatalf("%d events wait for the curator, want the one published before it started", info.NumPending)
	}
}

// TestAnUpgradeKeepsTheEventsWaiting: a CURATION made by an earlier
// version (limits retention) holds events published before the curator
// ever ran, with no consumer yet. Making the streams now (interest
// retention) keeps them for the curator: its consumers are made before
// the stream changes (a stream switched to interest with no consumer
// drops every message).
func TestAnUpgradeKeepsTheEventsWaiting(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "bus-test")
	js := b.JetStream()
	if err := js.DeleteStream(ctx, events.StreamCuration); err != nil {
		t.Fatal(err)
	}
	var old jetstream.StreamConfig
	for _, s := range events.Streams(1) {
		if s.Name == events.StreamCuration {
			old = s
		}
	}
	old.Retention, old.Discard, old.DiscardNewPerSubject = jetstream.LimitsPolicy, jetstream.DiscardOld, false
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		env, err := events.New("feed", &events.EpisodeUpserted{ID: fmt.Sprint("early", i), Source: "feed", Title: "before the upgrade"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, events.CurationSubject("feed", events.TypeEpisodeUpserted), env); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, events.StreamCuration)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Retention != jetstream.InterestPolicy || info.State.Msgs != 3 {
		t.Fatalf("after the upgrade: retention %v, %d events kept; want interest, the 3 waiting", info.Config.Retention, info.State.Msgs)
	}
	cons, err := st.Consumer(ctx, events.CuratorEpisodes.Config.Durable)
	if err != nil {
		t.Fatal(err)
	}
	if ci, err := cons.Info(ctx); err != nil || ci.NumPending != 3 {
		t.Fatalf("the curator's consumer has %v pending (%v), want the 3", ci, err)
	}
}
