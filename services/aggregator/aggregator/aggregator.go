// Package aggregator is the aggregator service (wayback-automatic-indexing.txt):
// on index.cdx.ready it records the file's current output, merges new
// outputs into a small recent generation, and folds everything into the main
// generation once recent grows past a threshold; each generation is written
// whole to the blob store and swapped in by one statement, so a query never
// sees a half-written index. Queries (a pywb / OpenWayback compatible CDX
// API) read both generations by binary search.
package aggregator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
	"github.com/archivist/archivist/services/aggregator/migrations"
)

// Config is the aggregator's configuration.
type Config struct {
	// HTTPAddr serves the CDX API.
	HTTPAddr string `env:"AGGREGATOR_HTTP_ADDR, default=:8084"`
	// MergeInterval is how often new outputs are merged.
	MergeInterval time.Duration `env:"AGGREGATOR_MERGE_INTERVAL, default=2s"`
	// RetireAfter is how long a replaced generation's object is kept for
	// the queries still reading it before it is deleted.
	RetireAfter time.Duration `env:"AGGREGATOR_RETIRE_AFTER, default=10m"`
	// MainThreshold folds the recent generation into main once it holds
	// this many lines.
	MainThreshold int64 `env:"AGGREGATOR_MAIN_THRESHOLD, default=1000000"`
	// Prefix is where generations are written in the blob store.
	Prefix string `env:"AGGREGATOR_PREFIX, default=index/"`
	// MaxQueryLines is the most lines one CDX query reads and answers,
	// whatever its limit (a sorted query orders at most these).
	MaxQueryLines int `env:"AGGREGATOR_MAX_QUERY_LINES, default=10000"`
	// FanIn is how many outputs a build reads at once: more are merged a
	// group at a time through temporary files, so a build's memory does
	// not grow with the archive.
	FanIn int `env:"AGGREGATOR_MERGE_FAN_IN, default=64"`
}

// Definition is the aggregator service.
func Definition() service.Definition {
	return service.Definition{
		Name:      "aggregator",
		Summary:   "sorts and merges CDX outputs into the index a Wayback replays from, and serves CDX queries",
		Schemas:   []store.Schema{migrations.Schema},
		NeedsDB:   true,
		NeedsBus:  true,
		NeedsBlob: true,
		Run:       service.Configured(run),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	a := &Aggregator{db: env.DB, blob: env.Blob, cfg: cfg, log: env.Log, wake: make(chan struct{}, 1), skipped: skippedCounter(env.Metrics), gate: env.Gate}
	sub, err := bus.Consume(ctx, env.Bus, events.AggregatorReady, a.Ready)
	if err != nil {
		return err
	}
	// One replica merges at a time (the leader); every replica answers
	// queries.
	loop := env.AsLeader("aggregator.merge", func(ctx context.Context) error { a.Loop(ctx); return nil })
	return env.Serve(ctx, "CDX API", cfg.HTTPAddr, a.Handler(), []service.Loop{loop}, sub.Stop)
}

// skippedCounter registers the counter of skipped announcements.
func skippedCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "archivist_aggregator_announcements_skipped_total",
		Help: "CDX announcements not newer than the output recorded for their file (late or replayed)."})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// Aggregator merges outputs and answers queries.
type Aggregator struct {
	db   *pgxpool.Pool
	blob blob.Store
	cfg  Config
	log  *slog.Logger
	wake chan struct{}
	// skipped counts announcements older than (or a replay of) the output
	// recorded.
	skipped prometheus.Counter
	// gate pauses the merges while a dependency is down (nil: never).
	gate *fault.Gate
}

// Ready records a file's new output. The announcement's send time is the
// output's version: a newer one wins, an equal one is a replay, an older one
// (arriving late) is skipped, logged and counted. The same output announced
// again later is not merged again. An output no longer the file's (the one
// a newer output replaced, or a late announcement's) is retired with the
// same transaction: its object is deleted after AGGREGATOR_RETIRE_AFTER,
// once a build that was reading it has ended (they were kept for ever).
func (a *Aggregator) Ready(ctx context.Context, m *bus.Message[events.IndexCDXReady]) error {
	var applied bool
	err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		var old *string
		if err := tx.QueryRow(ctx, `SELECT output FROM aggregator.outputs WHERE file = $1 FOR UPDATE`, m.Event.File).Scan(&old); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO aggregator.outputs (file, output, lines, version) VALUES ($1, $2, $3, $4)
			ON CONFLICT (file) DO UPDATE SET output = EXCLUDED.output, lines = EXCLUDED.lines, version = EXCLUDED.version,
				received_at = CASE WHEN aggregator.outputs.output <> EXCLUDED.output THEN clock_timestamp() ELSE aggregator.outputs.received_at END
			WHERE aggregator.outputs.version < EXCLUDED.version`, m.Event.File, m.Event.Output, m.Event.Lines, m.Envelope.SentAt)
		if err != nil {
			return err
		}
		applied = tag.RowsAffected() > 0
		stale := ""
		switch {
		case applied && old != nil && *old != m.Event.Output:
			stale = *old // replaced by the newer output
		case !applied && old != nil && *old != m.Event.Output:
			stale = m.Event.Output // a late announcement's output, never the file's now
		}
		if stale != "" {
			if _, err := tx.Exec(ctx, `INSERT INTO aggregator.retired (key) VALUES ($1) ON CONFLICT DO NOTHING`, stale); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record output of %s: %w", m.Event.File, err)
	}
	if !applied {
		a.skipped.Inc()
		a.log.Info("announcement not newer than the file's output: skipped", "file", m.Event.File, "output", m.Event.Output,
			"sent_at", m.Envelope.SentAt, "event", m.Envelope.ID)
		return nil
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return nil
}

// Loop merges until ctx ends.
func (a *Aggregator) Loop(ctx context.Context) {
	t := time.NewTicker(a.cfg.MergeInterval)
	defer t.Stop()
	for {
		if a.gate.Wait(ctx) != nil {
			return
		}
		if err := a.MergeNew(ctx); err != nil && ctx.Err() == nil && !a.gate.Observe(ctx, err) {
			a.log.Error("merge", "err", err)
		}
		if err := a.DeleteRetired(ctx); err != nil && ctx.Err() == nil && !a.gate.Observe(ctx, err) {
			a.log.Error("delete retired generations", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.wake:
		}
	}
}

// MergeNew rebuilds the recent generation from the outputs received since
// main was built, or, past the threshold, main from every output. It does
// nothing when no output arrived since the last build. Rebuilding from the
// outputs, rather than merging new lines into the old generation, is what
// keeps a re-indexed file's lines once: its new output replaces the old
// one, whose lines a merge into the old generation would keep.
func (a *Aggregator) MergeNew(ctx context.Context) error {
	var mainBuilt, recentBuilt time.Time
	if err := a.db.QueryRow(ctx, `SELECT (SELECT built_at FROM aggregator.generations WHERE level = 'main'),
		(SELECT built_at FROM aggregator.generations WHERE level = 'recent')`).Scan(&mainBuilt, &recentBuilt); err != nil {
		return fmt.Errorf("read generations: %w", err)
	}
	var fresh int
	var pendingLines int64
	if err := a.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE received_at > $2), coalesce(sum(lines) FILTER (WHERE received_at > $1), 0)
		FROM aggregator.outputs`, mainBuilt, recentBuilt).Scan(&fresh, &pendingLines); err != nil {
		return err
	}
	// Past the threshold, recent folds into main even when nothing new
	// arrived (the last outputs may have filled recent in one build).
	if pendingLines >= a.cfg.MainThreshold {
		return a.build(ctx, "main", time.Time{})
	}
	if fresh == 0 {
		return nil
	}
	return a.build(ctx, "recent", mainBuilt)
}

// build merges the outputs received after since into a new generation of
// level, writes it whole, and swaps it in with one statement (for main, the
// recent generation is emptied in the same statement).
func (a *Aggregator) build(ctx context.Context, level string, since time.Time) error {
	var cutoff time.Time
	if err := a.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&cutoff); err != nil {
		return err
	}
	// The outputs' keys go to a file, read back in order as the merge
	// opens them: one query's snapshot, and memory that does not grow
	// with the number of outputs.
	list, n, err := a.outputList(ctx, since, cutoff)
	if err != nil {
		return err
	}
	defer os.Remove(list.Name())
	defer list.Close()
	keys := bufio.NewScanner(list)
	tmp, err := os.CreateTemp("", "generation-*.cdx")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	// At most the fan-in of outputs open at once, whatever their number
	// (MergeBounded opens them once each, in order).
	lines, err := cdxindex.MergeBounded(tmp, n, a.cfg.FanIn, "", func(int) (io.ReadCloser, error) {
		if !keys.Scan() {
			return nil, fmt.Errorf("the list of outputs ended early: %v", keys.Err())
		}
		rc, _, err := a.blob.Get(ctx, keys.Text())
		if err != nil {
			return nil, fmt.Errorf("read output %s: %w", keys.Text(), err)
		}
		return rc, nil
	})
	if err != nil {
		return fmt.Errorf("merge %d outputs: %w", n, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	key := fmt.Sprintf("%s%s-%d.cdx", a.cfg.Prefix, level, cutoff.UnixNano())
	info, err := a.blob.Put(ctx, key, tmp, map[string]string{"content-type": "text/plain"})
	if err != nil {
		return fmt.Errorf("write generation: %w", err)
	}
	// The generations replaced are retired in the same statement; their
	// objects are deleted once queries reading them have had time to end.
	levels := []string{level}
	q := `WITH old AS (SELECT key FROM aggregator.generations WHERE level = ANY($7) AND key <> ''),
		retire AS (INSERT INTO aggregator.retired (key) SELECT key FROM old ON CONFLICT DO NOTHING)
		UPDATE aggregator.generations SET key = $2, lines = $3, bytes = $4, sources = $5, built_at = $6 WHERE level = $1`
	if level == "main" {
		levels = append(levels, "recent")
		q = `WITH old AS (SELECT key FROM aggregator.generations WHERE level = ANY($7) AND key <> ''),
		retire AS (INSERT INTO aggregator.retired (key) SELECT key FROM old ON CONFLICT DO NOTHING),
		r AS (UPDATE aggregator.generations SET key = '', lines = 0, bytes = 0, sources = 0, built_at = $6 WHERE level = 'recent')
		UPDATE aggregator.generations SET key = $2, lines = $3, bytes = $4, sources = $5, built_at = $6 WHERE level = $1`
	}
	if _, err := a.db.Exec(ctx, q, level, key, lines, info.Size, n, cutoff, levels); err != nil {
		return fmt.Errorf("swap in the %s generation: %w", level, err)
	}
	a.log.Info("generation built", "level", level, "outputs", n, "lines", lines, "key", key)
	return nil
}

// outputList writes the keys of the outputs received after since, up to
// cutoff, a line each in the files' order, to a temporary file, rewound,
// and counts them.
func (a *Aggregator) outputList(ctx context.Context, since, cutoff time.Time) (*os.File, int, error) {
	f, err := os.CreateTemp("", "outputs-*.txt")
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*os.File, int, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	rows, err := a.db.Query(ctx, `SELECT output FROM aggregator.outputs WHERE received_at > $1 AND received_at <= $2 ORDER BY file`, since, cutoff)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	w := bufio.NewWriter(f)
	n := 0
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return fail(err)
		}
		w.WriteString(k)
		w.WriteByte('\n')
		n++
	}
	if err := rows.Err(); err != nil {
		return fail(fmt.Errorf("list outputs: %w", err))
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return f, n, nil
}

// DeleteRetired deletes the objects of generations and outputs retired
// more than AGGREGATOR_RETIRE_AFTER ago, and forgets them.
func (a *Aggregator) DeleteRetired(ctx context.Context) error {
	rows, err := a.db.Query(ctx, `SELECT key FROM aggregator.retired WHERE retired_at < now() - $1::interval`, a.cfg.RetireAfter)
	if err != nil {
		return fmt.Errorf("retired generations: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("retired generations: %w", err)
	}
	for _, k := range keys {
		if err := a.blob.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("delete retired generation %s: %w", k, err)
		}
		if _, err := a.db.Exec(ctx, `DELETE FROM aggregator.retired WHERE key = $1`, k); err != nil {
			return fmt.Errorf("forget retired generation %s: %w", k, err)
		}
		a.log.Info("retired generation deleted", "key", k)
	}
	return nil
}

// Generation describes one level of the index.
type Generation struct {
	// Level is "recent" or "main".
	Level string `json:"level"`
	// Key is the generation's object in the blob store ("" before the first build).
	Key string `json:"key"`
	// Lines and Bytes are its size.
	Lines int64 `json:"lines"`
	Bytes int64 `json:"bytes"`
	// Sources is how many outputs were merged into it.
	Sources int `json:"sources"`
	// BuiltAt is when it was built.
	BuiltAt time.Time `json:"built_at"`
}

// Generations lists the current generations.
func (a *Aggregator) Generations(ctx context.Context) ([]Generation, error) {
	rows, err := a.db.Query(ctx, `SELECT level, key, lines, bytes, sources, built_at FROM aggregator.generations ORDER BY level`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Generation])
}

// Lookup answers a query from every generation: lines merged in order,
// identical lines once, at most limit.
func (a *Aggregator) Lookup(ctx context.Context, q cdxindex.Query, match func(key string) bool) ([]string, error) {
	gens, err := a.Generations(ctx)
	if err != nil {
		return nil, err
	}
	// One cursor per generation, merged in byte order as they are read:
	// the query stops reading once it has its lines.
	type head struct {
		c    *cdxindex.Cursor
		line string
	}
	var heads []*head
	for _, g := range gens {
		if g.Key == "" {
			continue
		}
		rc, info, err := a.blob.Get(ctx, g.Key)
		if err != nil {
			return nil, fmt.Errorf("open %s generation: %w", g.Level, err)
		}
		defer rc.Close()
		ra, ok := rc.(io.ReaderAt)
		if !ok {
			return nil, fmt.Errorf("the blob store cannot read %s at offsets", g.Key)
		}
		c, err := cdxindex.Open(ra, info.Size).Cursor(q)
		if err != nil {
			return nil, err
		}
		if l, ok := c.Next(); ok {
			heads = append(heads, &head{c, l})
		} else if err := c.Err(); err != nil {
			return nil, err
		}
	}
	var out []string
	last := ""
	for len(heads) > 0 && (q.Limit <= 0 || len(out) < q.Limit) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		best := 0
		for i, h := range heads {
			if h.line < heads[best].line {
				best = i
			}
		}
		h := heads[best]
		l := h.line
		if next, ok := h.c.Next(); ok {
			h.line = next
		} else {
			if err := h.c.Err(); err != nil {
				return nil, err
			}
			heads = append(heads[:best], heads[best+1:]...)
		}
		if l == last && len(out) > 0 {
			continue // the same line in two generations
		}
		last = l
		if k, _, _ := strings.Cut(l, " "); match == nil || match(k) {
			out = append(out, l)
		}
	}
	return out, nil
}
