package research_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
)

// roundTrips counts the statements a pool sends: each is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// loadScale fills the research schema with 20,000 episodes × 1,000 clips,
// half of every episode's clips researched (10 million pair rows), with
// generate_series.
func loadScale(b *testing.B, url string) { loadEpisodes(b, url, 20_000, 1000) }

// loadEpisodes fills the research schema with episodes × clips, half of
// every episode's clips researched, with generate_series.
func loadEpisodes(b *testing.B, url string, episodes, clips int) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	start := time.Now()
	for _, q := range []string{
		`INSERT INTO research.clips (key, active, media_key, priority, initial_curated_at, version)
		 SELECT 'clip:' || g, true, 'clips/' || g, g % 10, timestamptz '2020-01-01' + g * interval '1 hour', now()
		 FROM generate_series(1, ` + strconv.Itoa(clips) + `) g`,
		`INSERT INTO research.episodes (key, active, media_key, priority, initial_curated_at, version)
		 SELECT 'ep:' || g, true, 'audio/' || g, g % 5, timestamptz '2020-01-01' + g * interval '1 hour', now()
		 FROM generate_series(1, ` + strconv.Itoa(episodes) + `) g`,
		`INSERT INTO research.pairs (episode_id, clip_id, state)
		 SELECT e.id, c.id, 'researched' FROM research.episodes e, research.clips c WHERE c.id % 2 = 0`,
		`UPDATE research.episodes SET open_clips = ` + strconv.Itoa(clips/2) + `, researched_clips = ` + strconv.Itoa(clips/2),
		`VACUUM ANALYZE research.episodes`, `VACUUM ANALYZE research.clips`, `VACUUM ANALYZE research.pairs`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	b.Logf("loaded %d episodes × %d clips, %d researched pairs in %s", episodes, clips, episodes*clips/2, time.Since(start).Round(time.Second))
}

// BenchmarkSelectAndLease measures select+lease at 20,000 episodes × 1,000
// clips with half researched, side by side with a bare SELECT 1 round trip
// on the same pool: p50, p99, throughput and round trips per lease.
// docs/PERFORMANCE.md has figures and plans.
func BenchmarkSelectAndLease(b *testing.B) {
	url := testenv.DBURL(b, migrations.Schema)
	loadScale(b, url)
	ctx := context.Background()
	trips := &roundTrips{}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pc.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s := research.New(pool)
	if testing.Verbose() {
		explain(b, pool)
	}

	measure := func(b *testing.B, op func() error) {
		lat := make([]time.Duration, 0, b.N)
		trips.n.Store(0)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		b.ReportMetric(float64(trips.n.Load())/float64(b.N), "roundtrips/op")
	}
	b.Run("select1", func(b *testing.B) {
		measure(b, func() error {
			var one int
			return pool.QueryRow(ctx, "SELECT 1").Scan(&one)
		})
	})
	b.Run("lease", func(b *testing.B) {
		measure(b, func() error {
			l, err := s.Lease(ctx, 8, 10*time.Minute)
			if err == nil && (l == nil || len(l.Clips) == 0) {
				b.Fatalf("lease %+v", l)
			}
			return err
		})
	})
}

// explain logs the plans of the two selection statements at scale.
func explain(b *testing.B, pool *pgxpool.Pool) {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM research.episodes WHERE active AND open_clips > 0
		 ORDER BY priority DESC, initial_curated_at DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
		`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT c.id FROM research.clips c
		 WHERE c.active AND NOT EXISTS (SELECT 1 FROM research.pairs p WHERE p.episode_id = 20000 AND p.clip_id = c.id)
		 ORDER BY c.priority DESC, c.initial_curated_at DESC, c.id LIMIT 8`,
	} {
		rows, err := tx.Query(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s\n%s", strings.Join(strings.Fields(q), " "), strings.Join(lines, "\n"))
	}
}

// BenchmarkCurveLease is research selection as a cost curve: episodes
// 10^3 to 10^6, 100 clips, half researched (50 million pairs at the top),
// 500 select+leases of 8 clips: their p50 and p99 and the memory
// (scripts/curves plots it).
func BenchmarkCurveLease(b *testing.B) {
	ctx := context.Background()
	for _, n := range testenv.CurveSizes(1_000_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			url := testenv.DBURL(b, migrations.Schema)
			loadEpisodes(b, url, n, 100)
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			s := research.New(pool)
			for range b.N {
				testenv.ResetPeakRSS()
				lat := make([]time.Duration, 0, 500)
				t0 := time.Now()
				for range 500 {
					t1 := time.Now()
					l, err := s.Lease(ctx, 8, 10*time.Minute)
					if err != nil || l == nil || len(l.Clips) == 0 {
						b.Fatalf("lease %+v: %v", l, err)
					}
					lat = append(lat, time.Since(t1))
				}
				testenv.ReportCurve(b, 500, time.Since(t0))
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
