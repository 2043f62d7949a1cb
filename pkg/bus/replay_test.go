package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
)

// TestReplayAllAndOnlyToTheSourceStream: an operator replays every dead
// letter of a consumer at once once the cause is fixed; a dead letter
// whose headers name a subject outside the stream it came from is refused
// (a forged one could otherwise publish anywhere).
func TestReplayAllAndOnlyToTheSourceStream(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	c := testConsumer("many", 5*time.Second, 5)
	var broken atomic.Bool
	broken.Store(true)
	var handled atomic.Int32
	sub, err := bus.Consume(ctx, b, c, func(context.Context, *bus.Message[events.EpisodeUpserted]) error {
		if broken.Load() {
			return fault.Permanent(errors.New("not yet"))
		}
		handled.Add(1)
		return nil
	}, bus.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	for i := range 25 {
		publish(t, b, testSubject, episode(200+i))
	}
	deadLetters(t, b, 25)
	broken.Store(false)
	letters, err := b.DeadLetters(ctx, 0, 1000)
	if err != nil || len(letters) != 25 {
		t.Fatalf("%d dead letters: %v", len(letters), err)
	}
	for _, d := range letters {
		if _, err := b.Replay(ctx, d.Seq, "ops@example.org"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "every replayed message handled", func() bool { return handled.Load() == 25 })

	// A forged dead letter naming another stream's subject.
	forged := nats.NewMsg("deadletter.TESTWQ.many")
	forged.Data = []byte("x")
	forged.Header.Set(events.HeaderDLQStream, testStream.Name)
	forged.Header.Set(events.HeaderDLQConsumer, "many")
	forged.Header.Set(events.HeaderDLQSubject, "curation.episode.upserted")
	ack, err := b.JetStream().PublishMsg(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Replay(ctx, ack.Sequence, ""); err == nil || !strings.Contains(err.Error(), "not one of stream") {
		t.Errorf("forged dead letter replayed: %v", err)
	}

	// A service may publish dead letters only on its own consumers'
	// subjects, but writes their headers as it likes: one naming another
	// stream (CURATION) and a subject of it, on its own subject, used to be
	// replayed by an operator into that stream.
	onOwn := nats.NewMsg("deadletter.TESTWQ.many")
	onOwn.Data = []byte("x")
	onOwn.Header.Set(events.HeaderDLQStream, events.StreamCuration)
	onOwn.Header.Set(events.HeaderDLQConsumer, "curator-episodes")
	onOwn.Header.Set(events.HeaderDLQSubject, events.CurationSubject("radio", events.TypeEpisodeUpserted))
	ack, err = b.JetStream().PublishMsg(ctx, onOwn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Replay(ctx, ack.Sequence, ""); err == nil || !strings.Contains(err.Error(), "dead-lettered on deadletter.TESTWQ.many") {
		t.Errorf("a dead letter whose headers name another stream was replayed: %v", err)
	}

}

// TestAForgedDeadLetterIsNotReplayed (N32): a service writes its own
// consumers' dead letters, payload and headers alike; a compromised one
// could forge a letter that a replay would deliver to every consumer of a
// stream (the indexer and aggregator dropping a WARC's captures on a
// forged deletion). A letter is checked against the message it names
// where its stream keeps it: other bytes, or a message the stream never
// held, are refused; the real one is replayed.
func TestAForgedDeadLetterIsNotReplayed(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	env, err := events.New("curator", &events.ObjectDeleted{Object: "objects/a/v1/producer/a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bus.NewMsg(events.SubjectObjectDeleted, env)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := b.JetStream().PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	letter := func(seq uint64, data []byte) uint64 {
		t.Helper()
		l := nats.NewMsg(events.DeadLetterSubject(events.StreamArchive, events.AuditorDeleted.Config.Durable))
		l.Data = data
		l.Header.Set(events.HeaderDLQStream, events.StreamArchive)
		l.Header.Set(events.HeaderDLQConsumer, events.AuditorDeleted.Config.Durable)
		l.Header.Set(events.HeaderDLQSubject, events.SubjectObjectDeleted)
		l.Header.Set(events.HeaderDLQSequence, fmt.Sprint(seq))
		l.Header.Set(events.HeaderDLQReason, "forged")
		a, err := b.JetStream().PublishMsg(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		return a.Sequence
	}
	victim, _ := events.New("curator", &events.ObjectDeleted{Object: "warcs/victim.warc.gz"})
	forged, _ := victim.Marshal()
	if _, err := b.Replay(ctx, letter(ack.Sequence, forged), ""); err == nil || !strings.Contains(err.Error(), "differs from message") {
		t.Errorf("a letter with other bytes than the message it names was replayed: %v", err)
	}
	if _, err := b.Replay(ctx, letter(ack.Sequence+1000, forged), ""); err == nil || !strings.Contains(err.Error(), "never held") {
		t.Errorf("a letter naming a message its stream never held was replayed: %v", err)
	}
	if dl, err := b.Replay(ctx, letter(ack.Sequence, m.Data), ""); err != nil || dl.Producer != "" && dl.Producer != "curator" {
		t.Errorf("the real letter: %+v %v", dl, err)
	}
}
