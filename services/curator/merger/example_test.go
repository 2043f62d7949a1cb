package merger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2021, 4, 16, 0, 0, 0, 0, time.UTC)

// example runs matcher-versioning.txt's worked example through the matcher
// and a merger with the given version rule, each match result merged as soon
// as it is made, and returns the matcher and merger for further steps.
type example struct {
	t   *testing.T
	ctx context.Context
	mt  *matcher.Matcher
	mg  *merger.Merger
	cat *catalog.Catalog
}

func newExample(t *testing.T, rule merger.VersionRule) *example {
	pool := testenv.DB(t, migrations.Schema)
	cat := catalog.New(pool, nil, testenv.Logger(t))
	return &example{t: t, ctx: context.Background(), cat: cat, mt: matcher.New(cat, "matcher"),
		mg: merger.New(pool, nil, nil, testenv.Logger(t), merger.WithVersionRule(rule))}
}

// update stores work id as updated at time tick, saying it is the same as
// the others, then merges every match result the update produced.
func (e *example) update(id string, tick int, sameAs ...string) {
	e.t.Helper()
	links := make([]string, len(sameAs))
	for i, s := range sameAs {
		links[i] = "src:" + s
	}
	at := t0.Add(time.Duration(tick) * time.Hour)
	rec := catalog.Record{Kind: catalog.Episode, Source: "src", ID: id, Title: id + "@" + at.Format("15"), MediaKey: "audio/" + id,
		InitialCuratedAt: t0, LatestCuratedAt: at, SameAs: links, Version: at, EventID: id, Producer: "src"}
	_, results, err := e.mt.ApplyGroup(e.ctx, []catalog.Record{rec})
	if err != nil {
		e.t.Fatal(err)
	}
	e.merge(results)
}

func (e *example) merge(results []matcher.Result) {
	e.t.Helper()
	for _, r := range results {
		if _, err := e.mg.ApplyGroup(e.ctx, []merger.Match{{SentAt: r.Envelope.SentAt, Graph: &r.Graph}}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// state renders the works as "key:members" for works and "key>target" for
// redirects, sorted by key.
func (e *example) state() string {
	e.t.Helper()
	rows, err := merger.Rows(e.ctx, e.cat.DB(), catalog.Episode)
	if err != nil {
		e.t.Fatal(err)
	}
	var parts []string
	for _, r := range rows {
		switch r.State {
		case events.WorkMerged:
			parts = append(parts, strings.TrimPrefix(r.Key, "src:")+"="+strings.ReplaceAll(strings.Join(r.Members, ""), "src:", ""))
		case events.WorkRedirect:
			parts = append(parts, strings.TrimPrefix(r.Key, "src:")+">"+strings.TrimPrefix(r.RedirectTo, "src:"))
		default:
			parts = append(parts, r.Key+" "+r.State)
		}
	}
	return strings.Join(parts, " ")
}

// theExample: four works paired AB and CD at t=0, re-paired AD and BC by
// updates at t=1..4 that are processed in the order D, A, C, B.
func theExample(e *example) {
	e.update("A", 0, "B")
	e.update("B", 0, "A")
	e.update("C", 0, "D")
	e.update("D", 0, "C")
	if got, want := e.state(), "A=AB B>A C=CD D>C"; got != want {
		e.t.Fatalf("after t=0: %s, want %s", got, want)
	}
	e.update("D", 4, "A")
	e.update("A", 1, "D")
	e.update("C", 3, "B")
	e.update("B", 2, "C")
}

const wantFinal = "A=AD B=BC C>B D>A"

func TestWorkedExampleConvergesUnderMatcherTime(t *testing.T) {
	e := newExample(t, merger.MatcherTime)
	theExample(e)
	if got := e.state(); got != wantFinal {
		t.Errorf("final state %s, want %s", got, wantFinal)
	}
	// B's update split the four-member graph, so its match re-stamped both
	// halves at once: every row carries that newest time.
	rows, _ := merger.Rows(e.ctx, e.cat.DB(), catalog.Episode)
	var ad, bc time.Time
	for _, r := range rows {
		switch r.Key {
		case "src:A":
			ad = r.Version
		case "src:B":
			bc = r.Version
		}
	}
	if !bc.Equal(ad) || !ad.After(t0.Add(24*time.Hour)) {
		t.Errorf("BC version %s, AD version %s: want both the matcher time of B's update", bc, ad)
	}
	if v, err := merger.Show(e.ctx, e.cat.DB(), catalog.Episode, "src:C"); err != nil || v.Work == nil || v.Work.Key != "src:B" ||
		len(v.Sources) != 2 || len(v.Redirects) != 1 || len(v.Graph) != 2 {
		t.Errorf("show C: %+v %v", v, err)
	}
}

// TestWorkedExampleIsStuckUnderMaxSourceTime demonstrates the fault the
// spec describes: versioned by the newest source time, the BC graph (max t=3)
// can never replace what the ABCD graph wrote at t=4, however often it is
// matched again.
func TestWorkedExampleIsStuckUnderMaxSourceTime(t *testing.T) {
	e := newExample(t, merger.MaxSourceTime)
	theExample(e)
	got := e.state()
	if got == wantFinal {
		t.Fatalf("the original approach reached %s; the demonstration is void", got)
	}
	if !strings.Contains(got, "=ABCD") {
		t.Errorf("state %s: expected works still holding the stale four-member graph", got)
	}
	// Redriving does not help: the pipeline is stuck, not late.
	for _, key := range []string{"src:B", "src:C"} {
		results, err := e.mt.Rematch(e.ctx, catalog.Episode, key)
		if err != nil {
			t.Fatal(err)
		}
		e.merge(results)
	}
	if again := e.state(); again == wantFinal || again != got {
		t.Errorf("after rematching B and C: %s (before %s); want still stuck", again, got)
	}

	// The same database, switched to the matcher's time: one rematch each
	// repairs it, because every new match is newer than every old one.
	fixed := merger.New(e.cat.DB(), nil, nil, testenv.Logger(t))
	for _, key := range []string{"src:A", "src:B"} {
		results, err := e.mt.Rematch(e.ctx, catalog.Episode, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if _, err := fixed.ApplyGroup(e.ctx, []merger.Match{{SentAt: r.Envelope.SentAt, Graph: &r.Graph}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := e.state(); got != wantFinal {
		t.Errorf("after switching to matcher time and rematching: %s, want %s", got, wantFinal)
	}
}
