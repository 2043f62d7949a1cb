package curator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/completeness"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

// BenchmarkCurveCuration is curation's throughput as a cost curve: n
// episode records of three sources published over NATS into the curator's
// matcher and merger (CURATOR_CONCURRENCY's default), until every queue is
// drained: two in three records linked, both ways, to the same episode in
// another source, one in a hundred also to the next episode's (deeper
// graphs); one in ten published twice, one in ten preceded by an older
// version of itself, in an order shuffled within windows of 500. The
// records are made as they are published, so the benchmark's own memory
// does not grow with n. Nothing may be dead-lettered.
//
// It reports records a second end to end, time a record, the peak memory
// of the process (the embedded NATS server's with the curator's; with
// ARCHIVIST_BENCH_NATS the URL of a NATS server of its own, the curator's
// alone), and for
// the matcher and the merger each the PostgreSQL statements (round trips),
// rows and time a record; then it checks the promise twice: every record
// has exactly one row and the works' members are every record once, and a
// full pass of the curator's invariant (package completeness) finds
// nothing to heal, reporting its counts.
//
//	ARCHIVIST_CURVE_MAX=10000 go test -run '^$' -bench CurveCuration -benchtime 1x -timeout 60m ./services/curator/curator/
//	nats-server -js -sd /tmp/js -p 4333 & ARCHIVIST_BENCH_NATS=nats://127.0.0.1:4333 go test ... # the curator's memory alone
func BenchmarkCurveCuration(b *testing.B) {
	for _, n := range testenv.CurveSizes(1_000_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			for range b.N {
				url := testenv.DBURL(b, migrations.Schema)
				var matching, merging pgCounter
				pl := newPipelineOn(b, matching.pool(b, url), merging.pool(b, url))
				runtime.GC()
				testenv.ResetPeakRSS()
				t0 := time.Now()
				curationRecords(n, 7, func(window []bus.Outgoing) { pl.publish(b, window) })
				pl.drainWithin(b, 60*time.Minute)
				d := time.Since(t0)
				testenv.ReportCurve(b, n, d)
				b.ReportMetric(float64(n)/d.Seconds(), "records/s")
				matching.report(b, n, "matcher")
				merging.report(b, n, "merger")
				checkEveryRecordOnce(b, pl, n)
				checkInvariant(b, pl)
			}
		})
	}
}

// pgCounter counts the statements a pool sends, the rows they return or
// change, and the time they take.
type pgCounter struct {
	statements, rows, nanos atomic.Int64
}

type startedKey struct{}

// TraceQueryStart notes when a statement starts.
func (c *pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, startedKey{}, time.Now())
}

// TraceQueryEnd counts a statement.
func (c *pgCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	c.statements.Add(1)
	c.rows.Add(d.CommandTag.RowsAffected())
	if t, ok := ctx.Value(startedKey{}).(time.Time); ok {
		c.nanos.Add(int64(time.Since(t)))
	}
}

// pool is a pool on url whose statements c counts.
func (c *pgCounter) pool(b *testing.B, url string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 20
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// report reports a stage's statements, rows and PostgreSQL time a record.
func (c *pgCounter) report(b *testing.B, n int, stage string) {
	b.ReportMetric(float64(c.statements.Load())/float64(n), stage+"-statements/record")
	b.ReportMetric(float64(c.rows.Load())/float64(n), stage+"-rows/record")
	b.ReportMetric(float64(c.nanos.Load())/1e3/float64(n), stage+"-pg-us/record")
}

// curationRecords makes the benchmark's messages for n records and hands
// them to publish a shuffled window of about 500 at a time.
func curationRecords(n int, seed uint64, publish func([]bus.Outgoing)) {
	r := rand.New(rand.NewPCG(seed, 1))
	window := make([]bus.Outgoing, 0, 520)
	for i := range n {
		at := benchContent(i)
		if r.IntN(10) == 0 { // an older version arrives first
			old := at.Add(-500 * time.Millisecond)
			window = append(window, benchRecord(i, n, old, old))
		}
		m := benchRecord(i, n, at, at)
		window = append(window, m)
		if r.IntN(10) == 0 { // the same event again, under a new id
			dup := m
			dup.Envelope.ID += "-again"
			window = append(window, dup)
		}
		if len(window) >= 500 || i == n-1 {
			r.Shuffle(len(window), func(i, j int) { window[i], window[j] = window[j], window[i] })
			publish(window)
			window = window[:0]
		}
	}
}

// benchBase is when the benchmark's records were curated.
var benchBase = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// benchContent is the time of the last content of record i.
func benchContent(i int) time.Time { return benchBase.Add(time.Duration(i+1) * time.Second) }

// benchRecord is record i of n sent at sentAt with its content of time
// content: two records in three linked to the same episode in the other
// source, each to the other (a link across sources counts once it is
// returned); a few wiki records to the next episode's, both ways: deeper
// graphs.
func benchRecord(i, n int, sentAt, content time.Time) bus.Outgoing {
	var same []events.Ref
	switch {
	case i%3 == 0 && i+1 < n:
		same = append(same, benchRef(i+1))
	case i%3 == 1:
		same = append(same, benchRef(i-1))
	}
	if i%100 == 2 && i+3 < n {
		same = append(same, benchRef(i+3))
	}
	if i%100 == 5 {
		same = append(same, benchRef(i-3))
	}
	rf := benchRef(i)
	ev := &events.EpisodeUpserted{ID: rf.ID, Source: rf.Source, SameAs: same, Title: fmt.Sprintf("%s at %s", rf.Key(), content.Format(time.RFC3339Nano)),
		Media: events.Media{Key: "audio/" + rf.Source + "/" + rf.ID + ".mp3"}, Priority: int32(i % 10), InitialCuratedAt: benchBase, LatestCuratedAt: content}
	env, err := events.NewAt(rf.Source, sentAt, ev)
	if err != nil {
		panic(err)
	}
	return bus.Outgoing{Subject: subjectOf(env), Envelope: env}
}

// benchRef is the benchmark's record i: three sources in turn.
func benchRef(i int) events.Ref {
	return events.Ref{Source: []string{"feed", "log", "wiki"}[i%3], ID: fmt.Sprintf("ep%07d", i/3)}
}

// checkEveryRecordOnce checks the promise: every one of the n records has
// one row, a work or a redirect, and the works' members are every record
// once.
func checkEveryRecordOnce(b testing.TB, pl *pipeline, n int) {
	rows, err := merger.Rows(context.Background(), pl.p.Catalog.DB(), catalog.Episode)
	if err != nil {
		b.Fatal(err)
	}
	row := map[string]bool{}
	member := map[string]int{}
	works := 0
	for _, r := range rows {
		row[r.Key] = true
		if r.State == "work" {
			works++
			for _, m := range r.Members {
				member[m]++
			}
		}
	}
	missing, twice := 0, 0
	for i := range n {
		k := benchRef(i).Key()
		if !row[k] || member[k] == 0 {
			missing++
		}
		if member[k] > 1 {
			twice++
		}
	}
	report(b, float64(works), "works")
	st, err := pl.bus.JetStream().Stream(context.Background(), events.StreamDeadLetter)
	if err != nil {
		b.Fatal(err)
	}
	if info, _ := st.Info(context.Background()); info.State.Msgs != 0 {
		b.Errorf("%d messages dead-lettered", info.State.Msgs)
	}
	if missing > 0 || twice > 0 {
		b.Errorf("%d of %d records in no work, %d in two", missing, n, twice)
	}
}

// checkInvariant runs one full pass of the curator's invariant over the
// drained catalogue (no grace: nothing is in flight) and reports its
// counts: records, records placed in exactly one work, refused links, and
// violations (there must be none).
func checkInvariant(b testing.TB, pl *pipeline) {
	ctx := context.Background()
	check := completeness.New(pl.p.Catalog.DB(), pl.p.Rematch, nil, testenv.Logger(b), completeness.WithGrace(0), completeness.WithPage(10_000))
	for {
		st, err := check.Step(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range st.Passes {
			if p.Kind != catalog.Episode {
				continue
			}
			var c completeness.Counts
			for _, s := range p.Sources {
				c.Records, c.Placed, c.Refused = c.Records+s.Records, c.Placed+s.Placed, c.Refused+s.Refused
			}
			report(b, float64(c.Records), "invariant-records")
			report(b, float64(c.Placed), "invariant-placed")
			report(b, float64(c.Refused), "invariant-refused")
			report(b, float64(p.Violations), "invariant-violations")
			if p.Violations > 0 || c.Placed != c.Records {
				b.Errorf("the invariant's pass found %d violations; %d of %d records placed", p.Violations, c.Placed, c.Records)
			}
			return
		}
	}
}

// report reports a metric when tb is a benchmark.
func report(tb testing.TB, v float64, unit string) {
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(v, unit)
	}
}

// TestResendingASourceWhileOthersPublishEndsWithTheSameWorks: a catalogue
// of three sources is curated; then one source sends every record again
// (newer versions, the same content: a full reindex) while the other two
// go on publishing. No one stops for it, and once the queues drain the
// works are what they were, every record in one, the invariant whole.
func TestResendingASourceWhileOthersPublishEndsWithTheSameWorks(t *testing.T) {
	pl := newPipeline(t)
	const n = 900
	curationRecords(n, 3, func(w []bus.Outgoing) { pl.publish(t, w) })
	pl.drain(t)
	before := pl.works(t)
	resendWhileOthersPublish(t, pl, n, "feed")
	pl.drain(t)
	after := pl.works(t)
	if len(before) == 0 || !reflect.DeepEqual(before, after) {
		changed := 0
		for k, w := range before {
			if after[k] != w {
				changed++
			}
		}
		t.Fatalf("%d of %d works changed by the resend (%d rows after)", changed, len(before), len(after))
	}
	checkEveryRecordOnce(t, pl, n)
	checkInvariant(t, pl)
	// The records were matched and merged in groups, and the metrics say so.
	reg := prometheus.NewRegistry()
	reg.MustRegister(pl.p.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "archivist_curator_group_items" {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			stage := m.GetLabel()[0].GetValue()
			if h.GetSampleCount() == 0 {
				continue
			}
			t.Logf("%s: %d groups, %.0f events, %.1f a group", stage, h.GetSampleCount(), h.GetSampleSum(), h.GetSampleSum()/float64(h.GetSampleCount()))
			if stage == "match-episode" && (h.GetSampleSum() < 2*n || h.GetSampleSum()/float64(h.GetSampleCount()) < 2) {
				t.Errorf("%s: %.0f events in %d groups: want every event of both passes, in groups of more than one", stage, h.GetSampleSum(), h.GetSampleCount())
			}
		}
	}
}

// BenchmarkResendASource is the resend above at scale: records a second
// of one source's full resend while the others publish, until drained.
//
//	ARCHIVIST_CURVE_MAX=10000 go test -run '^$' -bench ResendASource -benchtime 1x ./services/curator/curator/
func BenchmarkResendASource(b *testing.B) {
	for _, n := range testenv.CurveSizes(100_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			for range b.N {
				pl := newPipeline(b)
				curationRecords(n, 3, func(w []bus.Outgoing) { pl.publish(b, w) })
				pl.drainWithin(b, 60*time.Minute)
				before := pl.works(b)
				t0 := time.Now()
				resendWhileOthersPublish(b, pl, n, "feed")
				pl.drainWithin(b, 60*time.Minute)
				d := time.Since(t0)
				b.ReportMetric(float64(n)/d.Seconds(), "records/s")
				b.ReportMetric(d.Seconds(), "s")
				if after := pl.works(b); !reflect.DeepEqual(before, after) {
					b.Errorf("the resend changed the works")
				}
				checkInvariant(b, pl)
			}
		})
	}
}

// resendWhileOthersPublish sends every record of source again, newer and
// unchanged, while the other sources' records are published again (newer,
// unchanged: the everyday traffic of sources that did not change) at the
// same time.
func resendWhileOthersPublish(tb testing.TB, pl *pipeline, n int, source string) {
	later := benchBase.Add(24 * time.Hour)
	var wg sync.WaitGroup
	for _, resent := range []bool{true, false} {
		wg.Go(func() {
			var window []bus.Outgoing
			for i := range n {
				if (benchRef(i).Source == source) != resent {
					continue
				}
				window = append(window, benchRecord(i, n, later.Add(time.Duration(i)*time.Millisecond), benchContent(i)))
				if len(window) == 500 {
					pl.publish(tb, window)
					window = window[:0]
				}
			}
			pl.publish(tb, window)
		})
	}
	wg.Wait()
}

// publish publishes a window of curation events as a well-behaved source
// does: when the stream refuses it for the events of its source already
// waiting (bus.IsFull), it waits and sends the window again (the events
// taken the first time are duplicates by their ids, and dropped).
func (pl *pipeline) publish(tb testing.TB, window []bus.Outgoing) {
	for {
		err := pl.bus.PublishBatch(context.Background(), window)
		if err == nil {
			return
		}
		if !bus.IsFull(err) {
			tb.Error(err)
			return
		}
		time.Sleep(100 * time.Millisecond) // the source's back-off
	}
}
