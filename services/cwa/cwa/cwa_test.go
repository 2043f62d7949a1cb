package cwa_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/services/cwa/cwa"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var day = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func work(kind, key string) *events.WorkUpserted {
	return &events.WorkUpserted{Kind: kind, Key: key, Version: day, State: events.WorkMerged,
		Media: events.Media{Key: "audio/" + key}, Priority: 1, InitialCuratedAt: day, LatestCuratedAt: day}
}

// delivery is the n-th delivery of result r.
func delivery(r events.ResearchCompleted, n uint64) *bus.Message[events.ResearchCompleted] {
	return &bus.Message[events.ResearchCompleted]{Event: &r, Metadata: &jetstream.MsgMetadata{NumDelivered: n}}
}

// TestResultsExtendAndTheFinalOneRevokes: a result is stored and extends
// its lease; the final one waits (a planned retry, no failure) while a
// sibling sent before it is not stored, then revokes the lease and wakes
// the pwa; a result again stores nothing twice; a result of a pair no
// lease holds is refused for good.
func TestResultsExtendAndTheFinalOneRevokes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := research.New(testenv.DB(t, migrations.Schema))
	for _, w := range []*events.WorkUpserted{work(events.KindEpisode, "radio:ep"), work(events.KindClip, "radio:c1"), work(events.KindClip, "radio:c2")} {
		if _, _, err := s.ApplyWork(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.Lease(ctx, 2, time.Minute)
	if err != nil || l == nil || len(l.Clips) != 2 {
		t.Fatalf("lease: %+v, %v", l, err)
	}
	b, err := bus.Connect(ctx, bus.Config{URL: testenv.NATS(t), Replicas: 1}, "cwa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(ctx) })
	woken := make(chan *nats.Msg, 4)
	sub, err := b.Conn().ChanSubscribe(events.SubjectPWAWake, woken)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c := cwa.New(b, s, research.Config{LeaseDuration: time.Hour}, nil, slog.New(slog.DiscardHandler))

	first := events.ResearchCompleted{LeaseID: l.ID, Episode: l.Episode.Key, Clip: l.Clips[0].Key, Researcher: "r1", Sent: 2,
		Occurrences: []events.Occurrence{{OffsetMS: 1000, DurationMS: 5000}}}
	final := events.ResearchCompleted{LeaseID: l.ID, Episode: l.Episode.Key, Clip: l.Clips[1].Key, Researcher: "r1", Sent: 2, Final: true}

	// The final result overtakes its sibling: it waits for it.
	if err := c.Result(ctx, delivery(final, 1)); !bus.IsRetryAfter(err) {
		t.Fatalf("the final result before its sibling: %v; want a planned retry", err)
	}
	for range 2 { // the sibling, and a delivery of it again
		if err := c.Result(ctx, delivery(first, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.StoredOfLease(ctx, l.ID); err != nil || n != 2 {
		t.Fatalf("results of the lease stored: %d, %v; want 2 (the final one, stored before it waited, and its sibling once)", n, err)
	}
	var expires time.Time
	if err := s.DB().QueryRow(ctx, `SELECT expires_at FROM research.leases WHERE id = $1`, l.ID).Scan(&expires); err != nil {
		t.Fatal(err)
	}
	if time.Until(expires) < 50*time.Minute {
		t.Errorf("the lease expires in %s after a result; want it extended to RESEARCH_LEASE_DURATION (1h)", time.Until(expires).Round(time.Second))
	}
	if err := c.Result(ctx, delivery(final, 2)); err != nil {
		t.Fatal(err)
	}
	if active, err := s.Revoke(ctx, l.ID); err != nil || active {
		t.Errorf("after the final result the lease is still active (%v)", err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Error("the pwa was not woken when the lease ended")
	}

	stray := events.ResearchCompleted{LeaseID: "0190a5a0-0000-7000-8000-000000000000", Episode: "radio:ep", Clip: "radio:nope", Researcher: "r1"}
	if err := c.Result(ctx, delivery(stray, 1)); !fault.IsPermanent(err) || !errors.Is(err, research.ErrUnknownPair) {
		t.Errorf("a result no lease holds: %v; want refused for good", err)
	}
}
