package matcher_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
)

// TestAGroupMatchesAsItsRecordsOneByOne applies the same random updates
// (three sources, one trusted; links within and across sources, some
// dropped again, some stale, operators' merges and splits between) one at
// a time to one database and in groups to another: the links, refusals
// and graphs stored must be the same, and so must each record's outcome.
func TestAGroupMatchesAsItsRecordsOneByOne(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			one := setup(t, matcher.TrustedLinkers("cat"))
			grouped := setup(t, matcher.TrustedLinkers("cat"))
			r := rand.New(rand.NewPCG(seed, 7))
			sources := []string{"feed", "log", "cat"}
			key := func() string { return fmt.Sprintf("%s:ep%d", sources[r.IntN(3)], r.IntN(40)) }
			base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			ctx := context.Background()
			for round := range 12 {
				var group []catalog.Record
				seen := map[string]bool{}
				for range 30 {
					k := key()
					if seen[k] {
						continue
					}
					seen[k] = true
					var same []string
					for range r.IntN(4) {
						if to := key(); to != k {
							same = append(same, to)
						}
					}
					v := base.Add(time.Duration(round*100+r.IntN(150)) * time.Second) // some older than what is stored
					src, id := splitKey(k)
					group = append(group, catalog.Record{Kind: catalog.Episode, Source: src, ID: id, Title: k, SameAs: same,
						Version: v, EventID: fmt.Sprint(v.UnixNano()), Producer: src})
				}
				var want []catalog.Outcome
				for _, rec := range group {
					o, _, err := one.m.ApplyGroup(ctx, []catalog.Record{rec})
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, o...)
				}
				got, _, err := grouped.m.ApplyGroup(ctx, slices.Clone(group))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: outcomes %v, one by one %v", round, got, want)
				}
				if round%4 == 3 { // an operator's decision, the same in both
					d := matcher.Decision{Kind: "episode", Action: []string{matcher.Merge, matcher.Split}[r.IntN(2)], A: group[0].Key(), B: group[1].Key(), By: "op", Reason: "test"}
					for _, b := range []*bundle{one, grouped} {
						if _, _, err := b.m.Decide(ctx, d); err != nil {
							t.Fatal(err)
						}
					}
				}
				a, b := state(t, one), state(t, grouped)
				if !slices.Equal(a, b) {
					t.Fatalf("round %d: stored state differs:\none by one: %v\nin a group: %v", round, diff(a, b), diff(b, a))
				}
				if round == 11 {
					kinds := map[string]int{}
					for _, s := range a {
						kinds[s[:strings.IndexByte(s, ' ')]]++
					}
					t.Logf("the same %d links, %d refusals, %d nodes", kinds["link"], kinds["refused"], kinds["node"])
					if kinds["link"] == 0 || kinds["refused"] == 0 {
						t.Fatalf("the updates made %d links and %d refusals: the comparison tests nothing", kinds["link"], kinds["refused"])
					}
				}
			}
		})
	}
}

func splitKey(k string) (string, string) {
	for i := range k {
		if k[i] == ':' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}

// state is what the matcher stored, as sorted lines: links, refusals with
// their reasons, and each node's graph.
func state(t *testing.T, b *bundle) []string {
	t.Helper()
	rows, err := b.cat.DB().Query(context.Background(), `SELECT 'link ' || from_key || ' ' || to_key FROM curator.match_links
		UNION ALL SELECT 'refused ' || from_key || ' ' || to_key || ': ' || reason FROM curator.match_refused
		UNION ALL SELECT 'node ' || key || ' in ' || graph FROM curator.match_nodes ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("nothing stored")
	}
	return out
}

// diff is what a has and b has not.
func diff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
