package matcher_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/migrations"
	"github.com/prometheus/client_golang/prometheus"
)

// bundle is a matcher over a fresh database, and a clock for versions.
type bundle struct {
	m   *matcher.Matcher
	cat *catalog.Catalog
	now time.Time
}

func setup(t *testing.T, opts ...matcher.Option) *bundle {
	t.Helper()
	db := testenv.DB(t, migrations.Schema)
	cat := catalog.New(db, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	return &bundle{m: matcher.New(cat, "curator", opts...), cat: cat, now: time.Now().UTC().Truncate(time.Microsecond)}
}

// apply stores the next version of source:id linking to sameAs and
// returns the graphs the update affected, each as its sorted members.
func (b *bundle) apply(t *testing.T, key string, sameAs ...string) (catalog.Outcome, [][]string) {
	t.Helper()
	b.now = b.now.Add(time.Second)
	return b.applyAt(t, b.now, key, 5, sameAs...)
}

func (b *bundle) applyAt(t *testing.T, version time.Time, key string, priority int32, sameAs ...string) (catalog.Outcome, [][]string) {
	t.Helper()
	source, id, _ := strings.Cut(key, ":")
	outs, results, err := b.m.ApplyGroup(context.Background(), []catalog.Record{{Kind: catalog.Episode, Source: source, ID: id, Title: key,
		Priority: priority, SameAs: sameAs, Version: version, EventID: fmt.Sprint(version.UnixNano()), Producer: source}})
	if err != nil {
		t.Fatal(err)
	}
	out := outs[0]
	var graphs [][]string
	for _, r := range results {
		if !slices.IsSorted(r.Graph.Members) {
			t.Errorf("members not sorted: %v", r.Graph.Members)
		}
		graphs = append(graphs, r.Graph.Members)
	}
	slices.SortFunc(graphs, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out, graphs
}

func same(got [][]string, want ...[]string) bool {
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// TestGraphsFollowTheLinks: records linked by same-as form one graph; an
// unlink splits it, and the update reports both graphs it touched; a stale
// update changes nothing but still reports its graph (a redelivery
// publishes what a crash lost).
func TestGraphsFollowTheLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, g := b.apply(t, "bbc:1"); !same(g, []string{"bbc:1"}) {
		t.Errorf("a lone record: %v", g)
	}
	if _, g := b.apply(t, "bbc:2", "bbc:1"); !same(g, []string{"bbc:1", "bbc:2"}) {
		t.Errorf("linked within a source: %v", g)
	}
	if _, g := b.apply(t, "bbc:3", "bbc:2"); !same(g, []string{"bbc:1", "bbc:2", "bbc:3"}) {
		t.Errorf("a chain: %v", g)
	}
	if _, g := b.apply(t, "bbc:2"); !same(g, []string{"bbc:1"}, []string{"bbc:2", "bbc:3"}) {
		t.Errorf("bbc:2 unlinks bbc:1: %v; want the two graphs it leaves", g)
	}
	out, g := b.applyAt(t, b.now.Add(-time.Hour), "bbc:2", 5, "bbc:1")
	if out != catalog.Stale || !same(g, []string{"bbc:2", "bbc:3"}) {
		t.Errorf("a stale update: %s, %v; want stale and the graph unchanged", out, g)
	}
	rec, err := b.cat.Get(context.Background(), catalog.Episode, "bbc:2")
	if err != nil || len(rec.SameAs) != 0 {
		t.Errorf("the stale update's links were stored: %+v, %v", rec.SameAs, err)
	}
}

// TestNoSourceTakesOverAnother: a link to another source's record counts
// once that record links back, and the refusal meanwhile says why; a
// trusted linker's counts at once; a source's priority is clamped.
func TestNoSourceTakesOverAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, matcher.TrustedLinkers("catalogue"), matcher.MaxPriority(10, map[string]int32{"vip": 50}))
	b.apply(t, "bbc:1")
	if _, g := b.apply(t, "itv:9", "bbc:1"); !same(g, []string{"itv:9"}) {
		t.Errorf("an unreciprocated link joined graphs: %v", g)
	}
	refused, err := matcher.RefusedLinks(ctx, b.cat.DB(), catalog.Episode, "itv:9")
	if err != nil || len(refused) != 1 || refused[0].To != "bbc:1" || refused[0].Reason != matcher.Unreciprocated {
		t.Errorf("refused links of itv:9: %+v, %v; want bbc:1, unreciprocated", refused, err)
	}
	if _, g := b.apply(t, "bbc:1", "itv:9"); !same(g, []string{"bbc:1", "itv:9"}) {
		t.Errorf("the link back: %v; want one graph", g)
	}
	if refused, _ := matcher.RefusedLinks(ctx, b.cat.DB(), catalog.Episode, "itv:9"); len(refused) != 0 {
		t.Errorf("the link, reciprocated, is still refused: %+v", refused)
	}
	if _, g := b.apply(t, "catalogue:7", "bbc:1"); !same(g, []string{"bbc:1", "catalogue:7", "itv:9"}) {
		t.Errorf("a trusted linker's link: %v; want it to count at once", g)
	}

	for key, want := range map[string]int32{"bbc:5": 10, "vip:5": 50} {
		b.now = b.now.Add(time.Second)
		b.applyAt(t, b.now, key, 1<<30)
		rec, err := b.cat.Get(ctx, catalog.Episode, key)
		if err != nil || rec.Priority != want {
			t.Errorf("%s asked for priority 2^30: kept %d (%v), want %d", key, rec.Priority, err, want)
		}
	}
}

// TestRematchRestampsAndLaggingFindsUnmerged: a rematch stamps the graph
// anew; a graph whose works the merger has not written is lagging, and its
// result carries the same message id each time it is rebuilt.
func TestRematchRestampsAndLaggingFindsUnmerged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.apply(t, "bbc:1")
	b.apply(t, "bbc:2", "bbc:1")
	r1, err := b.m.Rematch(ctx, catalog.Episode, "bbc:1")
	if err != nil || len(r1) != 1 || !same([][]string{r1[0].Graph.Members}, []string{"bbc:1", "bbc:2"}) {
		t.Fatalf("rematch: %+v, %v", r1, err)
	}
	lag, err := b.m.Lagging(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.m.Lagging(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(lag) != 1 || len(again) != 1 || lag[0].Envelope.ID != again[0].Envelope.ID || lag[0].Envelope.ID != r1[0].Envelope.ID {
		t.Errorf("lagging: %d and %d results, ids %v; want the rematched graph, with its own id each time", len(lag), len(again), []any{lag, again})
	}
}
