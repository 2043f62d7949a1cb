package curator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/curator"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

// pipeline is the curator's matcher and merger on a test's own NATS account
// and database.
type pipeline struct {
	bus  *bus.Bus
	p    *curator.Pipeline
	subs []*bus.Subscription
}

func newPipeline(t testing.TB) *pipeline {
	t.Helper()
	pool := testenv.DB(t, migrations.Schema)
	return newPipelineOn(t, pool, pool)
}

// newPipelineOn is newPipeline with the matcher's and the merger's pools.
func newPipelineOn(t testing.TB, matching, merging *pgxpool.Pool) *pipeline {
	t.Helper()
	var b *bus.Bus
	if url := os.Getenv("ARCHIVIST_BENCH_NATS"); url != "" {
		// A NATS server of its own, so that a benchmark's memory is the
		// curator's alone (the embedded server's per-subject state and
		// de-duplication ids grow with the works).
		b = testenv.BusAt(t, url, "curator")
	} else {
		b = testenv.Bus(t, "curator")
	}
	cat := catalog.New(matching, nil, testenv.Logger(t))
	p := curator.NewPipeline(b, cat, merger.New(merging, []string{"feed", "log"}, nil, testenv.Logger(t)))
	subs, err := p.Start(context.Background(), 256) // CURATOR_CONCURRENCY's default
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range subs {
			s.Stop(context.Background())
		}
	})
	return &pipeline{bus: b, p: p, subs: subs}
}

// drain waits until every curator consumer has nothing pending or unacked,
// twice in a row (the matcher feeds the merger).
func (pl *pipeline) drain(t testing.TB) { pl.drainWithin(t, 2*time.Minute) }

// drainWithin is drain, failing after d.
func (pl *pipeline) drainWithin(t testing.TB, d time.Duration) { drainBus(t, pl.bus, d) }

// drainBus waits until the curator's consumers on b (the episodes' and
// the merger's) have nothing pending or unacked three looks in a row (the
// matcher feeds the merger), failing after d.
func drainBus(t testing.TB, b *bus.Bus, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	idle := 0
	deadline := time.Now().Add(d)
	for idle < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("pipeline did not drain in %s", d)
		}
		busy := false
		for _, c := range []events.Consumer{events.CuratorEpisodes, events.CuratorMerger} {
			cons, err := b.JetStream().Consumer(ctx, c.Stream, c.Config.Durable)
			if err != nil {
				t.Fatal(err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.NumPending > 0 || info.NumAckPending > 0 {
				busy = true
			}
		}
		if busy {
			idle = 0
		} else {
			idle++
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// works renders every work row without its version: what the pipeline
// built, not when.
func (pl *pipeline) works(t testing.TB) map[string]string {
	t.Helper()
	rows, err := merger.Rows(context.Background(), pl.p.Catalog.DB(), catalog.Episode)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		r.Version = time.Time{}
		out[r.Key] = fmt.Sprintf("%+v", r)
	}
	return out
}

type update struct {
	env events.Envelope
	key string
}

// TestPropertyRandomRelinkingConverges: random link and unlink updates over
// 50 records from three sources, published in random order with duplicates,
// through JetStream, the matcher and the merger with eight handlers each.
// Once the queues drain, the works equal those a fresh pipeline builds from
// the final source records alone.
func TestPropertyRandomRelinkingConverges(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { relinkingConverges(t, seed) })
	}
}

func relinkingConverges(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	sources := []string{"feed", "log", "wiki"}
	const n = 50
	refs := make([]events.Ref, n)
	for i := range refs {
		refs[i] = events.Ref{Source: sources[i%3], ID: fmt.Sprintf("ep%02d", i)}
	}
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var updates []update
	latest := map[string]update{}
	mk := func(i, tick int) update {
		ref := refs[i]
		var same []events.Ref
		for range r.IntN(2) { // no link unlinks the record; sparse links keep many graphs
			j := r.IntN(n)
			if j != i {
				same = append(same, refs[j])
			}
		}
		sentAt := base.Add(time.Duration(tick) * time.Second)
		ev := &events.EpisodeUpserted{ID: ref.ID, Source: ref.Source, SameAs: same,
			Title:    fmt.Sprintf("%s t%d", ref.Key(), tick),
			Media:    events.Media{Key: fmt.Sprintf("audio/%s/%d.mp3", ref.Source, tick)},
			Priority: int32(r.IntN(10)), InitialCuratedAt: base, LatestCuratedAt: sentAt}
		env, err := events.NewAt(ref.Source, sentAt, ev)
		if err != nil {
			t.Fatal(err)
		}
		return update{env: env, key: ref.Key()}
	}
	tick := 0
	for i := range n { // every record exists
		tick++
		u := mk(i, tick)
		updates = append(updates, u)
		latest[u.key] = u
	}
	for range 250 { // then relinks and unlinks
		tick++
		u := mk(r.IntN(n), tick)
		updates = append(updates, u)
		latest[u.key] = u
	}
	r.Shuffle(len(updates), func(i, j int) { updates[i], updates[j] = updates[j], updates[i] })
	var batch []bus.Outgoing
	for i, u := range updates {
		batch = append(batch, bus.Outgoing{Subject: subjectOf(u.env), Envelope: u.env})
		if i%4 == 0 { // a duplicate: the same event, resent under a new id
			dup := u.env
			dup.ID += "-resent"
			batch = append(batch, bus.Outgoing{Subject: subjectOf(dup), Envelope: dup})
		}
		if i%7 == 0 { // and the very same message again (de-duplicated by JetStream)
			batch = append(batch, bus.Outgoing{Subject: subjectOf(u.env), Envelope: u.env})
		}
	}

	incremental := newPipeline(t)
	if err := incremental.bus.PublishBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	incremental.drain(t)
	got := incremental.works(t)
	st, err := incremental.bus.JetStream().Stream(context.Background(), events.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(context.Background()); info.State.Msgs != 0 {
		t.Errorf("%d messages dead-lettered", info.State.Msgs)
	}

	fresh := newPipeline(t)
	var finals []bus.Outgoing
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		finals = append(finals, bus.Outgoing{Subject: subjectOf(latest[k].env), Envelope: latest[k].env})
	}
	if err := fresh.bus.PublishBatch(context.Background(), finals); err != nil {
		t.Fatal(err)
	}
	fresh.drain(t)
	want := fresh.works(t)

	if len(want) != n {
		t.Fatalf("fresh pipeline built %d rows for %d records", len(want), n)
	}
	if !reflect.DeepEqual(got, want) {
		var diff []string
		for _, k := range keys {
			if got[k] != want[k] {
				diff = append(diff, fmt.Sprintf("%s:\n  got  %s\n  want %s", k, got[k], want[k]))
			}
		}
		t.Errorf("%d of %d keys differ from a fresh pipeline:\n%s", len(diff), n, strings.Join(diff, "\n"))
	}
	graphs := 0
	for _, w := range want {
		if strings.Contains(w, "State:work") {
			graphs++
		}
	}
	t.Logf("%d updates (%d messages) converged to %d works over %d records", len(updates), len(batch), graphs, n)
}

// TestReconcileRepublishesLostMatchResults: a graph whose match result never
// reached the merger (the bus lost it) is found from PostgreSQL and published
// again, with its original stamp; then nothing lags.
func TestReconcileRepublishesLostMatchResults(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "curator")
	pool := testenv.DB(t, migrations.Schema)
	cat := catalog.New(pool, nil, testenv.Logger(t))
	p := curator.NewPipeline(b, cat, merger.New(pool, nil, nil, testenv.Logger(t)))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "b"} {
		rec := catalog.Record{Kind: catalog.Episode, Source: "s", ID: id, Title: id, MediaKey: "m/" + id,
			InitialCuratedAt: at, LatestCuratedAt: at, SameAs: []string{"s:a"}, Version: at, EventID: id, Producer: "s"}
		if _, _, err := p.Matcher.ApplyGroup(ctx, []catalog.Record{rec}); err != nil { // matched, results never published
			t.Fatal(err)
		}
	}
	n, err := p.Reconcile(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d graphs, %v; want the one graph {a, b}", n, err)
	}
	subs, err := p.Start(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range subs {
			s.Stop(ctx)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := merger.Show(ctx, pool, catalog.Episode, "s:b")
		if err == nil && v.Work != nil && len(v.Work.Members) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the republished result was never merged: %+v %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := p.Reconcile(ctx); err != nil || n != 0 {
		t.Errorf("after merging: %d graphs still lag (%v)", n, err)
	}
}

// TestResyncWorksRepublishesEveryRow: after the WORKS stream lost its
// messages, a resync publishes every work row again (consumers replay what
// they have and recover what they lost).
func TestResyncWorksRepublishesEveryRow(t *testing.T) {
	ctx := context.Background()
	pl := newPipeline(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []bus.Outgoing
	for i, same := range []string{"", "ep0", "", ""} {
		ev := &events.EpisodeUpserted{ID: fmt.Sprintf("ep%d", i), Source: "feed", Title: "t", Media: events.Media{Key: "k"},
			InitialCuratedAt: at, LatestCuratedAt: at}
		if same != "" {
			ev.SameAs = []events.Ref{{Source: "feed", ID: same}}
		}
		env, _ := events.NewAt("feed", at, ev)
		batch = append(batch, bus.Outgoing{Subject: subjectOf(env), Envelope: env})
	}
	if err := pl.bus.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	pl.drain(t)
	rows := len(pl.works(t))
	st, err := pl.bus.JetStream().Stream(ctx, events.StreamWorks)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := pl.p.ResyncWorks(ctx)
	if err != nil || n != rows || rows != 4 {
		t.Fatalf("resync published %d of %d rows: %v", n, rows, err)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != uint64(rows) {
		t.Errorf("WORKS holds %d messages, want %d", info.State.Msgs, rows)
	}
	// Resyncs day after day: the stream keeps one message per work, not
	// one per work and resync.
	for range 3 {
		if _, err := pl.p.ResyncWorks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	info, _ = st.Info(ctx)
	if info.State.Msgs != uint64(rows) || info.State.NumSubjects != uint64(rows) {
		t.Errorf("after 3 more resyncs WORKS holds %d messages on %d subjects, want %d", info.State.Msgs, info.State.NumSubjects, rows)
	}
	// The one subject of earlier versions is no stream's: a publisher still
	// on it is refused, not collapsed into one message for every work.
	if _, err := pl.bus.JetStream().Publish(ctx, events.SubjectWorkUpserted, []byte("x")); err == nil {
		t.Error("a work published on the bare subject was taken")
	}
}

// TestResyncNeverHidesANewerWork: WORKS keeps one message per work. A
// resync that read a work before a merge changed it published the older
// version after the newer one, and the stream kept the older: a pwa that
// had not read the newer stayed on the older until the next day's resync.
// The older version is now kept back; the newer stays the work's message.
func TestResyncNeverHidesANewerWork(t *testing.T) {
	ctx := context.Background()
	pl := newPipeline(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &events.EpisodeUpserted{ID: "ep", Source: "feed", Title: "first", Media: events.Media{Key: "k"}, InitialCuratedAt: at, LatestCuratedAt: at}
	env, _ := events.NewAt("feed", at, ev)
	if _, err := pl.bus.Publish(ctx, subjectOf(env), env); err != nil {
		t.Fatal(err)
	}
	pl.drain(t)
	rows, err := merger.Rows(ctx, pl.p.Catalog.DB(), catalog.Episode)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v: %v", rows, err)
	}
	// A merge (of another replica) publishes a newer version of the work
	// after the resync read the row, before it publishes.
	newer := rows[0]
	newer.Version = newer.Version.Add(time.Minute)
	newer.Title = "second"
	nenv, _ := events.NewAt("curator", newer.Version, &newer)
	subject := events.WorkSubject(newer.Kind, newer.Key)
	if _, err := pl.bus.Publish(ctx, subject, nenv); err != nil {
		t.Fatal(err)
	}
	if _, err := pl.p.ResyncWorks(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := pl.bus.JetStream().Stream(ctx, events.StreamWorks)
	if err != nil {
		t.Fatal(err)
	}
	last, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.Unmarshal(last.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.SentAt.Equal(newer.Version) {
		t.Errorf("WORKS holds the work at %s, want the newer %s", got.SentAt, newer.Version)
	}
}
