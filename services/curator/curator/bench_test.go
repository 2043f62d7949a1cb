package curator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/merger"
)

// BenchmarkCurveCuration is curation's throughput as a cost curve: n
// episode records of three sources published over NATS into the curator's
// matcher and merger (eight handlers each), until every queue is drained:
// two in three records linked, both ways, to the same episode in another
// source, one in a hundred also to the next episode's (deeper graphs);
// one in ten published twice, one in ten preceded by an older version of
// itself, in an order shuffled within windows of 500. Nothing may be
// dead-lettered.
// It reports records a second end to end, time a record and the peak
// memory, then checks the invariant: every record has exactly one row,
// and the works' members are every record once.
//
//	ARCHIVIST_CURVE_MAX=10000 go test -run '^$' -bench CurveCuration -benchtime 1x -timeout 60m ./services/curator/curator/
func BenchmarkCurveCuration(b *testing.B) {
	for _, n := range testenv.CurveSizes(100_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			for range b.N {
				pl := newPipeline(b)
				msgs, keys := curationRecords(b, n, 7)
				runtime.GC()
				testenv.ResetPeakRSS()
				t0 := time.Now()
				for i := 0; i < len(msgs); i += 1000 {
					if err := pl.bus.PublishBatch(context.Background(), msgs[i:min(i+1000, len(msgs))]); err != nil {
						b.Fatal(err)
					}
				}
				pl.drainWithin(b, 60*time.Minute)
				d := time.Since(t0)
				testenv.ReportCurve(b, n, d)
				b.ReportMetric(float64(n)/d.Seconds(), "records/s")
				checkEveryRecordOnce(b, pl, keys)
			}
		})
	}
}

// curationRecords are the benchmark's messages for n records, and the
// records' keys.
func curationRecords(b *testing.B, n int, seed uint64) ([]bus.Outgoing, []string) {
	r := rand.New(rand.NewPCG(seed, 1))
	sources := []string{"feed", "log", "wiki"}
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	ref := func(i int) events.Ref { return events.Ref{Source: sources[i%3], ID: fmt.Sprintf("ep%07d", i/3)} }
	msg := func(i int, at time.Time) bus.Outgoing {
		// Two records in three linked to the same episode in the other
		// source, each to the other (a link across sources counts once it
		// is returned); a few wiki records to the next episode's, both
		// ways: deeper graphs.
		var same []events.Ref
		switch {
		case i%3 == 0 && i+1 < n:
			same = append(same, ref(i+1))
		case i%3 == 1:
			same = append(same, ref(i-1))
		}
		if i%100 == 2 && i+3 < n {
			same = append(same, ref(i+3))
		}
		if i%100 == 5 {
			same = append(same, ref(i-3))
		}
		rf := ref(i)
		ev := &events.EpisodeUpserted{ID: rf.ID, Source: rf.Source, SameAs: same, Title: fmt.Sprintf("%s at %s", rf.Key(), at.Format(time.RFC3339)),
			Media: events.Media{Key: "audio/" + rf.Source + "/" + rf.ID + ".mp3"}, Priority: int32(i % 10), InitialCuratedAt: base, LatestCuratedAt: at}
		env, err := events.NewAt(rf.Source, at, ev)
		if err != nil {
			b.Fatal(err)
		}
		return bus.Outgoing{Subject: subjectOf(env), Envelope: env}
	}
	var msgs []bus.Outgoing
	keys := make([]string, n)
	for i := range n {
		keys[i] = ref(i).Key()
		at := base.Add(time.Duration(i+1) * time.Second)
		if r.IntN(10) == 0 { // an older version arrives first
			msgs = append(msgs, msg(i, at.Add(-500*time.Millisecond)))
		}
		m := msg(i, at)
		msgs = append(msgs, m)
		if r.IntN(10) == 0 { // the same event again, under a new id
			dup := m
			dup.Envelope.ID += "-again"
			msgs = append(msgs, dup)
		}
	}
	for lo := 0; lo < len(msgs); lo += 500 {
		w := msgs[lo:min(lo+500, len(msgs))]
		r.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
	}
	return msgs, keys
}

// checkEveryRecordOnce checks the invariant: every record has one row, a
// work or a redirect, and the works' members are every record once.
func checkEveryRecordOnce(b *testing.B, pl *pipeline, keys []string) {
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
	for _, k := range keys {
		if !row[k] || member[k] == 0 {
			missing++
		}
		if member[k] > 1 {
			twice++
		}
	}
	b.ReportMetric(float64(works), "works")
	st, err := pl.bus.JetStream().Stream(context.Background(), events.StreamDeadLetter)
	if err != nil {
		b.Fatal(err)
	}
	if info, _ := st.Info(context.Background()); info.State.Msgs != 0 {
		b.Errorf("%d messages dead-lettered", info.State.Msgs)
	}
	if missing > 0 || twice > 0 {
		b.Errorf("%d of %d records in no work, %d in two", missing, len(keys), twice)
	}
}
