package pwa_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/services/pwa/pwa"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestShouldAdd(t *testing.T) {
	for _, c := range []struct {
		name                 string
		researchers, pending int
		want                 bool
	}{
		{"spec: 3 researchers, 4 items: position -1, a surplus", 3, 4, false},
		{"spec: 1 researcher, 1 item: position 0", 1, 1, true},
		{"spec: 5 researchers, 2 items: position 3", 5, 2, true},
		{"no researchers, empty queue: prime it with one item", 0, 0, true},
		{"no researchers, items waiting: exit", 0, 2, false},
	} {
		if got := pwa.ShouldAdd(c.researchers, c.pending); got != c.want {
			t.Errorf("%s: ShouldAdd(%d, %d) = %v", c.name, c.researchers, c.pending, got)
		}
	}
}

var cfg = pwa.Config{Research: research.Config{LeaseDuration: time.Minute, ItemTTL: 30 * time.Second, MaxClips: 2, LivenessTTL: 10 * time.Second},
	Interval: time.Hour, RecountInterval: time.Hour}

// TestActivation runs one activation against real NATS and PostgreSQL for
// each case of the capacity check: live researchers announced in the
// bucket, items already waiting in the queue, and plenty of work.
func TestActivation(t *testing.T) {
	for _, c := range []struct {
		researchers, pending, wantAdded int
	}{
		{3, 4, 0}, // surplus
		{1, 1, 1}, // position 0: one more, then -1
		{5, 2, 4}, // position 3, 2, 1, 0
		{0, 0, 1}, // prime the queue
		{0, 2, 0}, // no researchers, items waiting
	} {
		t.Run(fmt.Sprintf("r%d_p%d", c.researchers, c.pending), func(t *testing.T) {
			ctx := context.Background()
			b, p, kv := newPWA(t, 10)
			for i := range c.researchers {
				if _, err := kv.Put(ctx, fmt.Sprintf("r%d", i), []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			for i := range c.pending {
				queueItem(t, b, fmt.Sprintf("waiting-%d", i))
			}
			added, err := p.Activate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if added != c.wantAdded {
				t.Errorf("added %d items, want %d", added, c.wantAdded)
			}
			st, err := p.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Leases) != c.wantAdded || st.QueueDepth != int64(c.pending+c.wantAdded) || st.Researchers != c.researchers {
				t.Errorf("status: %d leases, queue %d, %d researchers", len(st.Leases), st.QueueDepth, st.Researchers)
			}
		})
	}
}

func TestItemTTLMustBeShorterThanTheLease(t *testing.T) {
	bad := cfg
	bad.Research.ItemTTL = bad.Research.LeaseDuration
	_, err := pwa.New(context.Background(), testenv.Bus(t, "pwa"), nil, bad, nil, testenv.Logger(t))
	if err == nil {
		t.Fatal("a work item TTL equal to the lease was accepted")
	}
}

// TestReplicasActivateOneAtATime: two pwa replicas activating side by side
// add what one activation would (they used to fill the queue twice).
func TestReplicasActivateOneAtATime(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "pwa")
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	seed(t, s, 20)
	kv, err := research.Researchers(ctx, b, cfg.Research)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		kv.Put(ctx, fmt.Sprintf("r%d", i), []byte("{}"))
	}
	var replicas []*pwa.PWA
	for range 2 {
		p, err := pwa.New(ctx, b, research.New(db), cfg, nil, testenv.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, p)
	}
	for round := range 5 {
		var wg sync.WaitGroup
		added := make([]int, 2)
		for i, p := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := p.Activate(ctx)
				if err != nil {
					t.Error(err)
				}
				added[i] = n
			}()
		}
		wg.Wait()
		st, err := replicas[0].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// 4 researchers and an empty queue: the spec adds 5 (positions 4..0).
		if st.QueueDepth > 5 {
			t.Fatalf("round %d: %d items queued by %v, want at most 5", round, st.QueueDepth, added)
		}
	}
}

// TestItemsAwaitingRedeliveryCountAsPending: an item that failed and waits
// out its redelivery delay is in NumAckPending, not NumPending; it still
// counts as pending, unless a busy researcher holds it (the pwa kept
// adding items while such one waited: 24 leases on one episode in a
// minute).
func TestItemsAwaitingRedeliveryCountAsPending(t *testing.T) {
	ctx := context.Background()
	b, p, kv := newPWA(t, 10)
	kv.Put(ctx, "r0", []byte(`{"id":"r0","busy":false}`))
	queueItem(t, b, "failed-1")
	cons, err := b.JetStream().Consumer(ctx, events.Researchers.Stream, events.Researchers.Config.Durable)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.NakWithDelay(time.Minute); err != nil { // the researcher failed it
			t.Fatal(err)
		}
	}
	// One idle researcher, one item waiting to be redelivered: position 0,
	// so one more item (not two).
	added, err := p.Activate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if added != 1 {
		t.Errorf("added %d items with one waiting for redelivery, want 1", added)
	}
}

// seed stores n merged episodes and n merged clips.
func seed(t *testing.T, s *research.Store, n int) {
	t.Helper()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		for _, kind := range []string{events.KindEpisode, events.KindClip} {
			if _, _, err := s.ApplyWork(context.Background(), &events.WorkUpserted{Kind: kind, Key: fmt.Sprintf("%s%d", kind, i), Version: at,
				State: events.WorkMerged, InitialCuratedAt: at, LatestCuratedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// newPWA is a pwa on a fresh bus and database holding works episodes and
// clips, with the researchers bucket it counts.
func newPWA(t *testing.T, works int) (*bus.Bus, *pwa.PWA, jetstream.KeyValue) {
	t.Helper()
	ctx := context.Background()
	b := testenv.Bus(t, "pwa")
	s := research.New(testenv.DB(t, migrations.Schema))
	seed(t, s, works)
	p, err := pwa.New(ctx, b, s, cfg, nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := research.Researchers(ctx, b, cfg.Research)
	if err != nil {
		t.Fatal(err)
	}
	return b, p, kv
}

// queueItem puts a work item of lease on the queue, as another activation
// would have.
func queueItem(t *testing.T, b *bus.Bus, lease string) {
	t.Helper()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env, _ := events.New("test", &events.WorkItem{LeaseID: lease, Episode: events.AudioRef{Key: "x"},
		Clips: []events.AudioRef{{Key: "y"}}, LeaseExpiresAt: at, ItemExpiresAt: at})
	if _, err := b.Publish(context.Background(), events.SubjectWorkItem, env, jetstream.WithMsgTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// TestOpenResearchIsWhatResearchersScaleOn: the gauge KEDA reads counts the
// episodes waiting or being researched, however short the pwa keeps the
// work queue, and it is exported under the name the ScaledObject names.
func TestOpenResearchIsWhatResearchersScaleOn(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "pwa")
	s := research.New(testenv.DB(t, migrations.Schema))
	seed(t, s, 7)
	reg := prometheus.NewRegistry()
	p, err := pwa.New(ctx, b, s, cfg, reg, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64 = -1
	for _, f := range families {
		if f.GetName() == events.MetricOpenResearch {
			got = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if got != 7 {
		t.Fatalf("%s = %v, want the 7 seeded episodes", events.MetricOpenResearch, got)
	}
	// A leased episode stays open (in progress); a parked one is not open.
	if _, err := s.Lease(ctx, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.EpisodeFailure(ctx, "", "episode3", "test", ""); err != nil || !ok {
		t.Fatalf("park: %v %v", ok, err)
	}
	if n := p.OpenResearch(); n != 7 {
		t.Errorf("within the cache time: %v, want the 7 read before", n)
	}
	fresh, err := pwa.New(ctx, b, s, cfg, nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := fresh.OpenResearch(); n != 6 {
		t.Errorf("after a lease and a parked episode: %v, want 6", n)
	}
}

// TestThePWARetiresThePrintsOfUnusedAudio: run as a service, the pwa
// publishes research.media.retired (reason unused) for the audio of a
// lease once no lease has named it for PWA_PRINT_RETENTION, each once.
func TestThePWARetiresThePrintsOfUnusedAudio(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := testenv.Bus(t, "pwa")
	s := research.New(testenv.DB(t, migrations.Schema))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, kind := range []string{events.KindEpisode, events.KindClip} {
		if _, _, err := s.ApplyWork(ctx, &events.WorkUpserted{Kind: kind, Key: kind + "0", Version: at, State: events.WorkMerged,
			InitialCuratedAt: at, LatestCuratedAt: at, Media: events.Media{Key: kind + ".wav", SHA256: fmt.Sprintf("%064d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	retired := make(chan *events.MediaRetired, 10)
	sub, err := b.Conn().Subscribe(events.SubjectMediaRetired, func(m *nats.Msg) {
		env, err := events.Unmarshal(m.Data)
		if err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		r, err := events.Decode[events.MediaRetired](env)
		if err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		retired <- r
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c := cfg
	c.PrintRetention, c.PrintCheckInterval = 300*time.Millisecond, 100*time.Millisecond
	p, err := pwa.New(ctx, b, s, c, nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.Activate(ctx); err != nil || n != 1 {
		t.Fatalf("activate: %d items (%v)", n, err)
	}
	stop := testenv.Go(t, func(ctx context.Context) error { p.Loop(ctx); return nil })
	defer stop()
	got := map[string]string{}
	for len(got) < 2 {
		select {
		case r := <-retired:
			if got[r.SHA256] != "" {
				t.Fatalf("%s retired twice", r.SHA256)
			}
			got[r.SHA256] = r.Work + " " + r.Reason
		case <-time.After(30 * time.Second):
			t.Fatalf("retired %v, want both pieces of audio", got)
		}
	}
	if got[fmt.Sprintf("%064d", 0)] != "episode0 unused" || got[fmt.Sprintf("%064d", 1)] != "clip0 unused" {
		t.Errorf("retired %v", got)
	}
	select {
	case r := <-retired:
		t.Errorf("%s retired again", r.SHA256)
	case <-time.After(500 * time.Millisecond):
	}
}
