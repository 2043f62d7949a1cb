package completeness_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/completeness"
	"github.com/archivist/archivist/services/curator/curator"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestTheInvariantFindsAndHealsLostRecords: records are lost on purpose
// between the matcher and the merger, each a way it can happen (a match
// result dropped from the bus, a crash between the merger's writes, a
// row written over by an older merge, a work left listing a record that
// moved), and the invariant's check finds each in its pass, matches the
// record again and, once the merger has caught up, finds nothing: every
// record in exactly one work, the per-source counts agreeing. Within the
// grace period nothing is judged.
func TestTheInvariantFindsAndHealsLostRecords(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "curator")
	pool := testenv.DB(t, migrations.Schema)
	p := curator.NewPipeline(b, catalog.New(pool, nil, testenv.Logger(t)),
		merger.New(pool, []string{"feed", "log", "wiki"}, nil, testenv.Logger(t)))
	subs, err := p.Start(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range subs {
			s.Stop(context.Background())
		}
	})
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	apply := func(rec catalog.Record, publish bool) {
		t.Helper()
		rec.Kind, rec.MediaKey, rec.InitialCuratedAt, rec.LatestCuratedAt = catalog.Episode, "m/"+rec.ID, at, at
		rec.Title, rec.Version, rec.EventID, rec.Producer = rec.Source+" "+rec.ID, at, rec.Source+rec.ID, rec.Source
		_, results, err := p.Matcher.ApplyGroup(ctx, []catalog.Record{rec})
		if err != nil {
			t.Fatal(err)
		}
		if publish {
			for _, r := range results {
				if err := p.Rematch(ctx, catalog.Kind(r.Graph.Kind), r.Graph.Members[0]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Three sources, twelve works: feed:eN, log:eN and wiki:eN linked both
	// ways (one work of three), and a one-sided link the matcher refuses.
	for i := range 12 {
		id := fmt.Sprintf("e%02d", i)
		apply(catalog.Record{Source: "feed", ID: id, SameAs: []string{"log:" + id}}, true)
		apply(catalog.Record{Source: "log", ID: id, SameAs: []string{"feed:" + id, "wiki:" + id}}, true)
		apply(catalog.Record{Source: "wiki", ID: id, SameAs: []string{"log:" + id}}, true)
	}
	apply(catalog.Record{Source: "wiki", ID: "lonely", SameAs: []string{"feed:e00"}}, true) // refused: feed:e00 does not link back
	placedAll := func() bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM curator.works WHERE kind = 'episode' AND state = 'work'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 13
	}
	testenv.Eventually(t, 30*time.Second, "the 13 works merged", placedAll)

	// Lost on purpose:
	// 1. a match result dropped: a record stored and matched, its result
	//    never published;
	apply(catalog.Record{Source: "feed", ID: "dropped"}, false)
	// 2. a crash between the merger's writes: a member's redirect row
	//    never written;
	if _, err := pool.Exec(ctx, `DELETE FROM curator.works WHERE kind = 'episode' AND key = 'wiki:e03'`); err != nil {
		t.Fatal(err)
	}
	// 3. a work row written over by an older merge;
	if _, err := pool.Exec(ctx, `UPDATE curator.works SET version = version - interval '1 hour' WHERE kind = 'episode' AND key = 'feed:e05'`); err != nil {
		t.Fatal(err)
	}
	// 4. a work left listing a record that moved to another work.
	if _, err := pool.Exec(ctx, `UPDATE curator.works SET members = members || '{log:e08}' WHERE kind = 'episode' AND key = 'feed:e07'`); err != nil {
		t.Fatal(err)
	}
	// Judged only past the grace period: nothing yet.
	patient := completeness.New(pool, p.Rematch, nil, testenv.Logger(t), completeness.WithGrace(time.Hour))
	if st, err := patient.Step(ctx); err != nil || len(st.Violations) != 0 {
		t.Fatalf("within the grace period: %+v, %v; want nothing judged", st.Violations, err)
	}

	reg := prometheus.NewRegistry()
	check := completeness.New(pool, p.Rematch, reg, testenv.Logger(t), completeness.WithPage(5), completeness.WithGrace(0), completeness.WithEvery(0))
	time.Sleep(10 * time.Millisecond) // the changes above are past a grace of 0
	pass := func() (completeness.Pass, []completeness.Violation) {
		t.Helper()
		var found []completeness.Violation
		for range 100 {
			st, err := check.Step(ctx)
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, st.Violations...)
			for _, ps := range st.Passes {
				if ps.Kind == catalog.Episode {
					return ps, found
				}
			}
		}
		t.Fatal("no pass ended in 100 steps")
		return completeness.Pass{}, nil
	}
	first, found := pass()
	got := map[string][]string{}
	for _, v := range found {
		got[v.Key] = append(got[v.Key], v.Check)
	}
	// Each is found by one check or another: wiki:e03's missing row from
	// its own side, or from its work's (which lists it), whichever the
	// pass reaches first (healing then rewrites the row).
	want := map[string][]string{
		"feed:dropped": {completeness.NoWork},
		"wiki:e03":     {completeness.NoWork, completeness.ListedElsewhere},
		"feed:e05":     {completeness.Stale},
		"feed:e07":     {completeness.ListedElsewhere},
		"log:e08":      {completeness.ListedElsewhere},
	}
	for k, checks := range want {
		if !slices.ContainsFunc(got[k], func(c string) bool { return slices.Contains(checks, c) }) {
			t.Errorf("%s: found %q, want one of %q (all found: %v)", k, got[k], checks, got)
		}
	}
	if first.Violations < len(want) {
		t.Errorf("the pass counted %d violations, want at least %d", first.Violations, len(want))
	}
	if n := metric(t, reg, "archivist_curator_invariant_healed_total", "kind", "episode"); n < float64(len(want)) {
		t.Errorf("%v records healed, want at least %d", n, len(want))
	}

	// Healed: the merger rewrites the works, and a later pass finds
	// nothing, every source's records all placed.
	var last completeness.Pass
	testenv.Eventually(t, time.Minute, "a pass that finds nothing", func() bool {
		time.Sleep(50 * time.Millisecond)
		last, _ = pass()
		return last.Violations == 0
	})
	if last.Unhealed != 0 {
		t.Errorf("%d violations unhealed", last.Unhealed)
	}
	wantCounts := map[string]completeness.Counts{
		"feed": {Records: 13, Placed: 13, Refused: 0},
		"log":  {Records: 12, Placed: 12, Refused: 0},
		"wiki": {Records: 13, Placed: 13, Refused: 1},
	}
	for s, c := range wantCounts {
		if last.Sources[s] != c {
			t.Errorf("source %s: %+v, want %+v", s, last.Sources[s], c)
		}
	}
	v, err := merger.Show(ctx, pool, catalog.Episode, "log:e08")
	if err != nil || v.Work == nil || !slices.Equal(v.Work.Members, []string{"feed:e08", "log:e08", "wiki:e08"}) {
		t.Errorf("log:e08's work after healing: %+v, %v", v.Work, err)
	}
	refused, err := matcher.RefusedLinks(ctx, pool, catalog.Episode, "wiki:lonely")
	if err != nil || len(refused) != 1 {
		t.Errorf("wiki:lonely's refused links: %+v, %v", refused, err)
	}
	// The pass is recorded for the curation status (any replica).
	passes, err := completeness.LastPasses(ctx, pool)
	if err != nil || passes[catalog.Episode].Violations != 0 || passes[catalog.Episode].Sources["wiki"] != wantCounts["wiki"] {
		t.Errorf("the recorded passes: %+v, %v", passes, err)
	}
	if n := metric(t, reg, "archivist_curator_invariant_placed", "kind", "episode", "source", "feed"); n != 13 {
		t.Errorf("archivist_curator_invariant_placed{source=feed} = %v, want 13", n)
	}
}

// metric is the value of the metric name with the labels given (name,
// value, ...) in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// TestAPassStartsAtMostEvery: a catalogue checked faster than its period
// is not read again until the next pass is due.
func TestAPassStartsAtMostEvery(t *testing.T) {
	ctx := context.Background()
	pool := testenv.DB(t, migrations.Schema)
	never := func(context.Context, catalog.Kind, string) error { t.Fatal("nothing to heal"); return nil }
	check := completeness.New(pool, never, nil, testenv.Logger(t), completeness.WithEvery(time.Hour))
	st, err := check.Step(ctx)
	if err != nil || len(st.Passes) != 2 {
		t.Fatalf("first step: %+v, %v; want both kinds' passes over an empty catalogue", st, err)
	}
	st, err = check.Step(ctx)
	if err != nil || len(st.Passes) != 0 || st.Checked != 0 {
		t.Fatalf("second step: %+v, %v; want nothing before the next pass is due", st, err)
	}
	again := completeness.New(pool, never, nil, testenv.Logger(t), completeness.WithEvery(0))
	for range 2 {
		if st, err := again.Step(ctx); err != nil || len(st.Passes) != 2 {
			t.Fatalf("with no period: %+v, %v; want a pass each step", st, err)
		}
	}
}
