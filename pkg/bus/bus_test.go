package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testStream is a work-queue stream of the tests' own.
var testStream = jetstream.StreamConfig{
	Name:       "TESTWQ",
	Subjects:   []string{"testwq.>"},
	Retention:  jetstream.WorkQueuePolicy,
	Duplicates: time.Minute,
	Storage:    jetstream.FileStorage,
}

const testSubject = "testwq.episode"

func testConsumer(name string, ackWait time.Duration, maxDeliver int) events.Consumer {
	return events.Consumer{Stream: testStream.Name, Config: jetstream.ConsumerConfig{
		Durable:    name,
		AckPolicy:  jetstream.AckExplicitPolicy,
		AckWait:    ackWait,
		MaxDeliver: maxDeliver,
	}}
}

func setup(t *testing.T) *bus.Bus {
	t.Helper()
	b := testenv.Bus(t, "bus-test")
	if _, err := b.JetStream().CreateOrUpdateStream(context.Background(), testStream); err != nil {
		t.Fatal(err)
	}
	return b
}

func episode(i int) *events.EpisodeUpserted {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &events.EpisodeUpserted{
		ID:               fmt.Sprintf("ep-%04d", i),
		Title:            "Episode",
		Media:            events.Media{Key: fmt.Sprintf("audio/ep-%04d.mp3", i)},
		InitialCuratedAt: at,
		LatestCuratedAt:  at,
	}
}

func publish(t *testing.T, b *bus.Bus, subject string, e events.Event) events.Envelope {
	t.Helper()
	env, err := events.New("bus-test", e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(context.Background(), subject, env); err != nil {
		t.Fatal(err)
	}
	return env
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}

func stop(t *testing.T, s *bus.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// deadLetters returns the messages in the dead-letter stream.
func deadLetters(t *testing.T, b *bus.Bus, want int) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	st, err := b.JetStream().Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("%d dead letters", want), func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs >= uint64(want)
	})
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); len(out) < want; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("dead letter %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

func consumerInfo(t *testing.T, b *bus.Bus, c events.Consumer) *jetstream.ConsumerInfo {
	t.Helper()
	cons, err := b.JetStream().Consumer(context.Background(), c.Stream, c.Config.Durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestRedeliveryAfterHandlerError(t *testing.T) {
	b := setup(t)
	c := testConsumer("redeliver", 5*time.Second, 5)
	var calls atomic.Int32
	var firstAt, secondAt atomic.Int64
	sub, err := bus.Consume(context.Background(), b, c, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		n := calls.Add(1)
		if n == 1 {
			firstAt.Store(time.Now().UnixNano())
			if m.Metadata.NumDelivered != 1 {
				t.Errorf("first delivery has NumDelivered %d", m.Metadata.NumDelivered)
			}
			return errors.New("transient failure")
		}
		secondAt.Store(time.Now().UnixNano())
		if m.Event.ID != "ep-0001" {
			t.Errorf("redelivered event %q", m.Event.ID)
		}
		return nil
	}, bus.WithRetryDelay(200*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	publish(t, b, testSubject, episode(1))
	waitFor(t, 10*time.Second, "redelivery", func() bool { return calls.Load() >= 2 })
	if gap := time.Duration(secondAt.Load() - firstAt.Load()); gap < 150*time.Millisecond {
		t.Errorf("redelivered after %s, want the nak delay of 200ms", gap)
	}
	waitFor(t, 5*time.Second, "ack", func() bool {
		info := consumerInfo(t, b, c)
		return info.NumAckPending == 0 && info.NumPending == 0
	})
	time.Sleep(300 * time.Millisecond)
	if n := calls.Load(); n != 2 {
		t.Errorf("handler called %d times, want 2", n)
	}
}

func TestGarbageIsDeadLetteredWithReason(t *testing.T) {
	b := setup(t)
	c := testConsumer("garbage", 5*time.Second, 5)
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
	m.Data = []byte("\xc1 this is not msgpack")
	m.Header.Set("X-Origin", "fuzzer")
	m.Header.Set(events.HeaderMsgID, "garbage-1")
	if _, err := b.JetStream().PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	dl := deadLetters(t, b, 1)[0]
	if got := dl.Header.Get(events.HeaderDLQReason); !strings.Contains(got, "undecodable") {
		t.Errorf("reason %q does not say undecodable", got)
	}
	if got := dl.Header.Get("X-Origin"); got != "fuzzer" {
		t.Errorf("original header lost: X-Origin=%q", got)
	}
	if got := dl.Header.Get(events.HeaderOriginalPrefix + events.HeaderMsgID); got != "garbage-1" {
		t.Errorf("original message id %q", got)
	}
	if got := dl.Header.Get(events.HeaderDLQConsumer); got != "garbage" {
		t.Errorf("consumer header %q", got)
	}
	if string(dl.Data) != string(m.Data) {
		t.Errorf("payload changed: %q", dl.Data)
	}
	if calls.Load() != 0 {
		t.Errorf("handler saw garbage")
	}
	waitFor(t, 5*time.Second, "terminated message leaves the work queue", func() bool {
		info := consumerInfo(t, b, c)
		return info.NumAckPending == 0 && info.NumRedelivered == 0
	})
}

func TestInvalidEventIsDeadLetteredNamingTheField(t *testing.T) {
	b := setup(t)
	c := testConsumer("invalid", 5*time.Second, 5)
	sub, err := bus.Consume(context.Background(), b, c, func(context.Context, *bus.Message[events.EpisodeUpserted]) error {
		t.Error("handler saw an invalid event")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	bad := episode(2)
	bad.Media.SHA256 = "not-hex"
	publish(t, b, testSubject, bad)
	dl := deadLetters(t, b, 1)[0]
	if got := dl.Header.Get(events.HeaderDLQReason); !strings.Contains(got, "media.sha256") {
		t.Errorf("reason %q does not name media.sha256", got)
	}
}

func TestPermanentHandlerErrorIsDeadLettered(t *testing.T) {
	b := setup(t)
	c := testConsumer("permanent", 5*time.Second, 5)
	var calls atomic.Int32
	sub, err := bus.Consume(context.Background(), b, c, func(context.Context, *bus.Message[events.EpisodeUpserted]) error {
		calls.Add(1)
		return fault.Permanent(errors.New("media key names no object"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	publish(t, b, testSubject, episode(3))
	dl := deadLetters(t, b, 1)[0]
	if got := dl.Header.Get(events.HeaderDLQReason); !strings.Contains(got, "media key names no object") {
		t.Errorf("reason %q", got)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1", n)
	}
}

func TestMaxDeliveredMessageMovesToDeadLetters(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	mover, err := b.StartDeadLetterMover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, mover)
	c := testConsumer("always-fails", 5*time.Second, 3)
	var calls atomic.Int32
	sub, err := bus.Consume(ctx, b, c, func(context.Context, *bus.Message[events.EpisodeUpserted]) error {
		calls.Add(1)
		return errors.New("downstream is down")
	}, bus.WithRetryDelay(20*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	env := publish(t, b, testSubject, episode(4))

	dl := deadLetters(t, b, 1)[0]
	// The dead letter names the error that spent the last delivery.
	if got := dl.Header.Get(events.HeaderDLQReason); got != "gave up after 3 deliveries: downstream is down" {
		t.Errorf("reason %q, want the last error", got)
	}
	if got := dl.Header.Get(events.HeaderDLQDeliveries); got != "3" {
		t.Errorf("deliveries header %q, want 3", got)
	}
	if got := dl.Header.Get(events.HeaderOriginalPrefix + events.HeaderMsgID); got != env.ID {
		t.Errorf("original id %q, want %q", got, env.ID)
	}
	if got, err := events.Unmarshal(dl.Data); err != nil || got.ID != env.ID {
		t.Errorf("dead letter does not hold the event: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("handler called %d times, want 3", n)
	}
	st, _ := b.JetStream().Stream(ctx, testStream.Name)
	waitFor(t, 5*time.Second, "the message to leave the work queue", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}

func TestRepublishedIDIsDeduplicated(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	env, err := events.New("bus-test", episode(5))
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.Publish(ctx, testSubject, env)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Publish(ctx, testSubject, env)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !second.Duplicate || first.Sequence != second.Sequence {
		t.Errorf("first %+v second %+v: want the second to be a duplicate of the first", first, second)
	}
	st, _ := b.JetStream().Stream(ctx, testStream.Name)
	info, _ := st.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", info.State.Msgs)
	}
}

func TestInProgressKeepsSlowHandlerFromRedelivery(t *testing.T) {
	b := setup(t)
	c := testConsumer("slow", time.Second, 5)
	var calls atomic.Int32
	sub, err := bus.Consume(context.Background(), b, c, func(context.Context, *bus.Message[events.EpisodeUpserted]) error {
		calls.Add(1)
		time.Sleep(3 * time.Second) // three ack waits
		return nil
	}, bus.WithConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	publish(t, b, testSubject, episode(6))
	waitFor(t, 10*time.Second, "ack", func() bool {
		info := consumerInfo(t, b, c)
		return calls.Load() == 1 && info.NumAckPending == 0 && info.NumPending == 0
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("slow handler called %d times: the message was redelivered", n)
	}
	if info := consumerInfo(t, b, c); info.NumRedelivered != 0 {
		t.Errorf("%d redelivered", info.NumRedelivered)
	}
}

// TestStopDrainsWithoutLosingMessages: a consumer stopped mid-stream hands
// every message it has already pulled to its handlers and settles it; the
// next consumer handles the rest, each message once. The messages the
// server was sending for the last pull request when the subscription went
// away are marked delivered by the server and reach no one (a window
// JetStream has by design: nats-io/nats.go#898): they come again after the
// ack wait, at most one pull batch of them. The test used to want none
// (with a 30 s ack wait), and failed about once in 30 runs on a busy
// machine.
func TestStopDrainsWithoutLosingMessages(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	c := testConsumer("drain", 3*time.Second, 5)
	const total = 300
	batch := make([]bus.Outgoing, total)
	for i := range batch {
		env, err := events.New("bus-test", episode(i))
		if err != nil {
			t.Fatal(err)
		}
		batch[i] = bus.Outgoing{Subject: testSubject, Envelope: env}
	}
	if err := b.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string]int{}
	handler := func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		seen[m.Event.ID]++
		mu.Unlock()
		return nil
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	const pullBatch = 50
	first, err := bus.Consume(ctx, b, c, handler, bus.WithConcurrency(4), bus.WithPullMaxMessages(pullBatch))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "some messages handled", func() bool { return count() >= 40 })
	stop(t, first)
	afterStop := count()
	if info := consumerInfo(t, b, c); info.NumAckPending > pullBatch {
		t.Errorf("%d messages left unacked by a drained consumer: more than the last pull request's %d", info.NumAckPending, pullBatch)
	}
	if afterStop >= total {
		t.Fatalf("all %d handled before stop; the test proves nothing", total)
	}

	second, err := bus.Consume(ctx, b, c, handler, bus.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, second)
	waitFor(t, 20*time.Second, "every message handled", func() bool { return count() == total })
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
}

func TestDeadLettersListAndReplay(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	c := testConsumer("fixable", 5*time.Second, 5)
	var broken atomic.Bool
	broken.Store(true)
	var handled atomic.Int32
	var replayedBy atomic.Value
	sub, err := bus.Consume(ctx, b, c, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		if broken.Load() {
			return fault.Permanent(errors.New("media store unreachable for this key"))
		}
		replayedBy.Store(m.Header.Get(events.HeaderReplayedBy))
		handled.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	env := publish(t, b, testSubject, episode(7))
	deadLetters(t, b, 1)
	list, err := b.DeadLetters(ctx, 0, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	dl := list[0]
	if dl.Stream != testStream.Name || dl.Consumer != "fixable" || dl.Subject != testSubject || dl.ID != env.ID ||
		dl.Type != events.TypeEpisodeUpserted || !strings.Contains(dl.Reason, "unreachable") {
		t.Errorf("dead letter %+v", dl)
	}
	broken.Store(false) // the operator fixed the cause
	if _, err := b.Replay(ctx, dl.Seq, "ops@example.org"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the replayed message handled", func() bool { return handled.Load() == 1 })
	if by := replayedBy.Load(); by != "ops@example.org" {
		t.Errorf("the replayed message says it was replayed by %q", by)
	}
	if list, _ := b.DeadLetters(ctx, 0, 10); len(list) != 0 {
		t.Errorf("replayed dead letter still listed: %+v", list)
	}
}

// TestKeyValueIsMadeByTheDeployIdentity: a bus that does not manage the
// streams binds to a bucket and never makes one; it refuses a bucket whose
// TTL differs from its configuration; a managing bus makes and updates it.
func TestKeyValueIsMadeByTheDeployIdentity(t *testing.T) {
	ctx := context.Background()
	url := testenv.NATS(t)
	connect := func(manages bool) *bus.Bus {
		b, err := bus.Connect(ctx, bus.Config{URL: url, Replicas: 1, EnsureStreams: manages}, "kv-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close(ctx) })
		return b
	}
	cfg := jetstream.KeyValueConfig{Bucket: "kvtest", TTL: 10 * time.Second, History: 1}
	service := connect(false)
	if _, err := service.KeyValue(ctx, cfg); err == nil || !strings.Contains(err.Error(), "archivist migrate") {
		t.Fatalf("binding a bucket nobody made: %v, want an error naming archivist migrate", err)
	}
	if _, err := service.JetStream().KeyValue(ctx, cfg.Bucket); err == nil {
		t.Fatal("a non-managing bus made the bucket")
	}
	deploy := connect(true)
	if _, err := deploy.EnsureKeyValue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	kv, err := service.KeyValue(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "r0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.TTL = time.Minute
	if _, err := service.KeyValue(ctx, other); err == nil || !strings.Contains(err.Error(), "1m0s") {
		t.Fatalf("binding with another TTL: %v, want an error naming both", err)
	}
	// The managing bus updates it to its configuration.
	if _, err := deploy.KeyValue(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := service.KeyValue(ctx, other); err != nil {
		t.Fatalf("after the update: %v", err)
	}
}
