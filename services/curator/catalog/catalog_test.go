package catalog_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func record(id string, v int) catalog.Record {
	return catalog.Record{
		Kind: catalog.Episode, Source: "test", ID: id, Title: fmt.Sprintf("%s v%d", id, v), MediaKey: "audio/" + id + ".mp3",
		DurationMS: int64(v) * 1000, Priority: int32(v), InitialCuratedAt: t0, LatestCuratedAt: t0.Add(time.Duration(v) * time.Hour),
		Version: t0.Add(time.Duration(v) * time.Microsecond), EventID: fmt.Sprintf("%s-%d", id, v), Producer: "test",
	}
}

func newCatalog(t *testing.T) (*catalog.Catalog, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return catalog.New(testenv.DB(t, migrations.Schema), reg, testenv.Logger(t)), reg
}

func upsert(t *testing.T, c *catalog.Catalog, r catalog.Record, want catalog.Outcome) {
	t.Helper()
	got, err := c.UpsertMany(context.Background(), c.DB(), []catalog.Record{r})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != want {
		t.Errorf("upsert %s v%s: %s, want %s", r.ID, r.EventID, got, want)
	}
}

func TestAGroupIsStoredWithEachRecordsOutcomeInOrder(t *testing.T) {
	c, _ := newCatalog(t)
	upsert(t, c, record("ep-1", 5), catalog.Applied)
	upsert(t, c, record("ep-2", 5), catalog.Applied)
	group := []catalog.Record{record("ep-3", 1), record("ep-2", 4), record("ep-1", 6), record("ep-0", 2)}
	got, err := c.UpsertMany(context.Background(), c.DB(), group)
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.Outcome{catalog.Applied, catalog.Stale, catalog.Applied, catalog.Applied}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v (in the order given)", got, want)
	}
	for _, id := range []string{"ep-0", "ep-1", "ep-2", "ep-3"} {
		r, err := c.Get(context.Background(), catalog.Episode, "test:"+id)
		if err != nil {
			t.Fatal(err)
		}
		if wantV := map[string]int{"ep-0": 2, "ep-1": 6, "ep-2": 5, "ep-3": 1}[id]; r.EventID != fmt.Sprintf("%s-%d", id, wantV) {
			t.Errorf("%s stored at event %s, want %d", id, r.EventID, wantV)
		}
	}
	again, err := c.UpsertMany(context.Background(), c.DB(), group)
	if err != nil {
		t.Fatal(err)
	}
	if want := []catalog.Outcome{catalog.Replay, catalog.Stale, catalog.Replay, catalog.Replay}; !slices.Equal(again, want) {
		t.Fatalf("the group again: %v, want %v", again, want)
	}
}

func TestSameEventTwiceIsAReplay(t *testing.T) {
	c, reg := newCatalog(t)
	upsert(t, c, record("ep-1", 1), catalog.Applied)
	upsert(t, c, record("ep-1", 1), catalog.Replay)
	got, err := c.Get(context.Background(), catalog.Episode, "test:ep-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := record("ep-1", 1); !equal(got, want) {
		t.Errorf("stored %+v, want %+v", got, want)
	}
	if n := testutil.ToFloat64(counter(t, reg, "replay")); n != 1 {
		t.Errorf("replay counter %v", n)
	}
}

func TestOlderAfterNewerIsSkippedAndCounted(t *testing.T) {
	c, reg := newCatalog(t)
	upsert(t, c, record("ep-2", 5), catalog.Applied)
	upsert(t, c, record("ep-2", 3), catalog.Stale)
	upsert(t, c, record("ep-2", 7), catalog.Applied)
	upsert(t, c, record("ep-2", 6), catalog.Stale)
	got, _ := c.Get(context.Background(), catalog.Episode, "test:ep-2")
	if got.Title != "ep-2 v7" || !got.Version.Equal(record("ep-2", 7).Version) {
		t.Errorf("stored %q at %s, want v7", got.Title, got.Version)
	}
	if n := testutil.ToFloat64(counter(t, reg, "stale")); n != 2 {
		t.Errorf("stale counter %v, want 2", n)
	}
}

func TestEpisodesAndClipsAreSeparate(t *testing.T) {
	c, _ := newCatalog(t)
	clip := record("same-id", 1)
	clip.Kind = catalog.Clip
	upsert(t, c, record("same-id", 2), catalog.Applied)
	upsert(t, c, clip, catalog.Applied)
	got, _ := c.Get(context.Background(), catalog.Clip, "test:same-id")
	if got.Title != "same-id v1" {
		t.Errorf("clip %+v", got)
	}
}

// TestShuffledReplayConverges applies 1,000 updates (50 records, 20 versions
// each) in random order from 8 writers at once; every record ends at its
// newest version, whatever the order.
func TestShuffledReplayConverges(t *testing.T) {
	c, reg := newCatalog(t)
	const ids, versions = 50, 20
	var all []catalog.Record
	for i := range ids {
		for v := 1; v <= versions; v++ {
			all = append(all, record(fmt.Sprintf("ep-%03d", i), v))
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// Replay a tenth of them again: duplicates on top of disorder.
	all = append(all, all[:len(all)/10]...)

	work := make(chan catalog.Record)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rec := range work {
				if _, err := c.UpsertMany(context.Background(), c.DB(), []catalog.Record{rec}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for _, rec := range all {
		work <- rec
	}
	close(work)
	wg.Wait()

	for i := range ids {
		id := fmt.Sprintf("ep-%03d", i)
		got, err := c.Get(context.Background(), catalog.Episode, "test:"+id)
		if err != nil {
			t.Fatal(err)
		}
		if want := record(id, versions); !equal(got, want) {
			t.Errorf("%s converged to %q (%s), want %q", id, got.Title, got.Version, want.Title)
		}
	}
	applied := testutil.ToFloat64(counter(t, reg, "applied"))
	stale := testutil.ToFloat64(counter(t, reg, "stale"))
	replay := testutil.ToFloat64(counter(t, reg, "replay"))
	if int(applied+stale+replay) != len(all) {
		t.Errorf("outcomes %v+%v+%v do not add up to %d updates", applied, stale, replay, len(all))
	}
	if applied < ids || stale == 0 {
		t.Errorf("applied %v, stale %v: the shuffle should apply each record at least once and skip some", applied, stale)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, outcome string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					c.Add(m.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}

func equal(a, b catalog.Record) bool {
	if a.SameAs == nil {
		a.SameAs = []string{}
	}
	if b.SameAs == nil {
		b.SameAs = []string{}
	}
	return reflect.DeepEqual(a, b)
}
