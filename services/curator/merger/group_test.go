package merger_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestAGroupMergesAsItsResultsOneByOne merges the same match results (of
// episodes and clips, some replayed, some stale) one at a time into one
// database and in groups into another: the rows returned, the works stored
// and the explanations recorded must be the same.
func TestAGroupMergesAsItsResultsOneByOne(t *testing.T) {
	ctx := context.Background()
	type side struct {
		cat *catalog.Catalog
		mt  *matcher.Matcher
		mg  *merger.Merger
	}
	mk := func() side {
		pool := testenv.DB(t, migrations.Schema)
		cat := catalog.New(pool, nil, testenv.Logger(t))
		return side{cat, matcher.New(cat, "matcher"), merger.New(pool, []string{"feed"}, nil, testenv.Logger(t))}
	}
	one, grouped := mk(), mk()
	var results []matcher.Result
	for i := range 30 {
		for _, s := range []side{one, grouped} {
			for _, kind := range []catalog.Kind{catalog.Episode, catalog.Clip} {
				src := []string{"feed", "log"}[i%2]
				var same []string
				if i%2 == 1 {
					same = []string{fmt.Sprintf("feed:x%d", i-1)}
				} else {
					same = []string{fmt.Sprintf("log:x%d", i+1)}
				}
				at := t0.Add(time.Duration(i) * time.Minute)
				rec := catalog.Record{Kind: kind, Source: src, ID: fmt.Sprintf("x%d", i), Title: fmt.Sprint(i), SameAs: same,
					InitialCuratedAt: t0, LatestCuratedAt: at, Version: at, EventID: fmt.Sprint(i), Producer: src}
				_, rs, err := s.mt.ApplyGroup(ctx, []catalog.Record{rec})
				if err != nil {
					t.Fatal(err)
				}
				if s.cat == one.cat {
					results = append(results, rs...)
				}
			}
		}
	}
	// Every result, the first ten again (replays), and the results of the
	// same graphs in reverse (older first: stale after the newer).
	var matches []merger.Match
	for _, r := range results {
		matches = append(matches, merger.Match{SentAt: r.Envelope.SentAt, Graph: &r.Graph})
	}
	matches = append(matches, matches[:10]...)
	for i := len(results) - 1; i >= 0; i-- {
		matches = append(matches, merger.Match{SentAt: results[i].Envelope.SentAt, Graph: &results[i].Graph})
	}
	var want [][]merger.Row
	for _, m := range matches {
		rows, err := one.mg.ApplyGroup(ctx, []merger.Match{m})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rows[0])
	}
	// Groups as the pipeline forms them: no two of a group share a key.
	var got [][]merger.Row
	for rest := matches; len(rest) > 0; {
		var group, later []merger.Match
		taken := map[string]bool{}
		for _, m := range rest {
			clash := false
			for _, k := range m.Graph.Members {
				clash = clash || taken[m.Graph.Kind+k]
			}
			if clash {
				later = append(later, m)
				for _, k := range m.Graph.Members {
					taken[m.Graph.Kind+k] = true
				}
				continue
			}
			for _, k := range m.Graph.Members {
				taken[m.Graph.Kind+k] = true
			}
			group = append(group, m)
		}
		rows, err := grouped.mg.ApplyGroup(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows...)
		rest = later
	}
	count := func(rs [][]merger.Row) int {
		n := 0
		for _, r := range rs {
			n += len(r)
		}
		return n
	}
	if count(got) != count(want) {
		t.Fatalf("groups returned %d current rows, one by one %d", count(got), count(want))
	}
	for _, kind := range []catalog.Kind{catalog.Episode, catalog.Clip} {
		a, err := merger.Rows(ctx, one.cat.DB(), kind)
		if err != nil {
			t.Fatal(err)
		}
		b, err := merger.Rows(ctx, grouped.cat.DB(), kind)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s works differ:\none by one %v\nin groups %v", kind, a, b)
		}
	}
	history := func(s side) []string {
		rows, err := s.cat.DB().Query(ctx, `SELECT kind || ' ' || key || ' ' || version || ' ' || explanation::text FROM curator.work_history ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if a, b := history(one), history(grouped); len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("explanations differ: %d one by one, %d in groups", len(a), len(b))
	}
}
