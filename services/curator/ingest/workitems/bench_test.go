package workitems_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/work"
)

// sizes are the archive sizes BenchmarkWorkSearch runs at.
var sizes = flag.String("work-sizes", "1000,10000,100000,1000000", "jobs in the archive, comma-separated")

// load fills the curator's tables with n jobs (in batches of 100) as an
// archive holds them: 98 % completed, 1.5 % pending, 0.5 % failed with one
// of a few errors, over 20 collections and 50 depositors, each with its
// ARK, local id and payload URL; their moves spread over a year.
func load(b *testing.B, db *pgxpool.Pool, n int) {
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO curator.batches (id, submitter, profile, payload_url, type, state, state_at)
		SELECT g, 'dep' || (g % 50), 'c' || (g % 20), 'https://depositor.example/b/' || g, 'file', 'completed', now() - (g % 365) * interval '1 day'
		FROM generate_series(1, $1) g`, n/100+1); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO curator.jobs (id, batch_id, submitter, profile, kind, payload_url, state, state_at, last_successful, error, ark, local_id)
		SELECT g, 1 + g / 100, 'dep' || ((1 + g / 100) % 50), 'c' || ((1 + g / 100) % 20), 'file', 'https://depositor.example/f/' || g,
			CASE WHEN g % 200 = 7 THEN 'failed' WHEN g % 200 < 3 THEN 'pending' ELSE 'completed' END,
			now() - (g % 365) * interval '1 day' - (g % 86400) * interval '1 second',
			CASE WHEN g % 200 = 7 THEN 'provisioning' ELSE 'notify' END,
			CASE WHEN g % 200 = 7 THEN (ARRAY['download: origin timed out after 3 attempts', 'download: 404 Not Found', 'digest mismatch in file ' || g,
				'zip: entry name escapes the object'])[1 + (g / 200) % 4] ELSE '' END,
			'ark:/99999/fk4' || g, 'local-' || g
		FROM generate_series(1, $1) g`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `SELECT setval('curator.jobs_id_seq', $1), setval('curator.batches_id_seq', $2)`, n, n/100+1); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE curator.jobs; ANALYZE curator.batches`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWorkSearch times the operator's searches (work.Store.Find and
// a dry run, as the API serves them) over archives of 10^3 to 10^6 jobs:
// the first page of everything, failures of a collection, an ARK, words of
// an error, a page deep in the completed, a depositor's own, and a dry-run
// retry of every failure. Each query runs 200 times; p50 and p99 are
// reported per query and size (the bound: p99 under 200 ms at
// 10^6).
//
//	go test -run '^$' -bench WorkSearch -benchtime 1x ./services/curator/ingest/workitems/
func BenchmarkWorkSearch(b *testing.B) {
	ctx := context.Background()
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			s, db := rig(b)
			start := time.Now()
			load(b, db, n)
			b.Logf("%d jobs loaded in %s", n, time.Since(start).Round(time.Millisecond))
			// A cursor deep in the completed: 20 pages in.
			deep := ""
			for range 20 {
				p, err := s.Find(ctx, work.Filter{States: []string{"completed"}}, deep, 50)
				if err != nil {
					b.Fatal(err)
				}
				deep = p.Next
			}
			queries := []struct {
				name string
				run  func() (int, error)
			}{
				{"first-page", func() (int, error) { p, err := s.Find(ctx, work.Filter{}, "", 50); return len(p.Items), err }},
				{"collection-failed", func() (int, error) {
					p, err := s.Find(ctx, work.Filter{Collection: "c7", States: []string{"failed"}}, "", 50)
					return len(p.Items), err
				}},
				{"ark", func() (int, error) {
					p, err := s.Find(ctx, work.Filter{Query: fmt.Sprintf("ark:/99999/fk4%d", n/2)}, "", 50)
					return len(p.Items), err
				}},
				{"error-words", func() (int, error) {
					p, err := s.Find(ctx, work.Filter{Query: "timed out"}, "", 50)
					return len(p.Items), err
				}},
				{"deep-page", func() (int, error) {
					p, err := s.Find(ctx, work.Filter{States: []string{"completed"}}, deep, 50)
					return len(p.Items), err
				}},
				{"depositor-own", func() (int, error) {
					p, err := s.Find(ctx, work.Filter{Submitter: "dep3", Kind: "job"}, "", 50)
					return len(p.Items), err
				}},
				{"dry-run-retry-failed", func() (int, error) {
					c, err := s.DryRun(ctx, work.Retry, work.Filter{Kind: "job", States: []string{"failed"}})
					return c.N, err
				}},
			}
			b.ResetTimer()
			for range b.N {
				for _, q := range queries {
					var took []time.Duration
					got := 0
					for range 200 {
						t0 := time.Now()
						m, err := q.run()
						took = append(took, time.Since(t0))
						if err != nil {
							b.Fatal(q.name, err)
						}
						got = m
					}
					if got == 0 {
						b.Fatalf("%s found nothing", q.name)
					}
					slices.Sort(took)
					p50, p99 := took[len(took)/2], took[len(took)*99/100]
					b.ReportMetric(float64(p99.Microseconds())/1000, q.name+"-p99-ms")
					b.Logf("%d jobs, %s: %d found, p50 %s, p99 %s", n, q.name, got, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
				}
			}
		})
	}
}
