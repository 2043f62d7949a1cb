// Package aggregator is the aggregator service (wayback-automatic-indexing.txt):
// on index.cdx.ready it records the file's current output; each tick it
// merges the outputs not yet built into a level-0 ZipNum cluster, and a
// level holding AGGREGATOR_LEVEL_FACTOR clusters merges its oldest into one
// of the next level, so no merge reads more than the fan-in and none
// rewrites the archive for a few new files. Each cluster is written whole
// to the blob store and swapped in by one statement, so a query never sees
// a half-written index. Queries (pywb's CDX server API) read the clusters'
// summaries, kept in memory, and one or two blocks of each.
package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/checkpoint"
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
	// LevelFactor is how many clusters a level holds before its oldest
	// merge into one of the next level (at most the fan-in).
	LevelFactor int `env:"AGGREGATOR_LEVEL_FACTOR, default=8"`
	// BuildOutputs is the most new outputs one level-0 build merges (more
	// wait for the next build).
	BuildOutputs int `env:"AGGREGATOR_BUILD_OUTPUTS, default=4096"`
	// BlockLines is how many CDX lines a ZipNum block holds.
	BlockLines int `env:"AGGREGATOR_BLOCK_LINES, default=3000"`
	// Prefix is where clusters are written in the blob store.
	Prefix string `env:"AGGREGATOR_PREFIX, default=index/"`
	// MaxQueryLines is the most lines one CDX query reads, kept by its
	// filters or not, whatever its limit (a sorted query orders at most
	// these); an answer cut short says so (Archivist-Lines-Read-Cap).
	MaxQueryLines int `env:"AGGREGATOR_MAX_QUERY_LINES, default=10000"`
	// QueryTimeout is the most time one CDX query runs.
	QueryTimeout time.Duration `env:"AGGREGATOR_QUERY_TIMEOUT, default=10s"`
	// FanIn is how many outputs a build reads at once: more are merged a
	// group at a time through temporary files, so a build's memory does
	// not grow with the archive.
	FanIn int `env:"AGGREGATOR_MERGE_FAN_IN, default=64"`
	// AccessPoints are the open views of the index for Wayback front ends
	// (GET /NAME/cdx without a key): "public:embargo=365:rate=10" (access.go).
	AccessPoints AccessPoints `env:"AGGREGATOR_ACCESS_POINTS"`
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
		Config:    new(Config),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	if cfg.LevelFactor < 2 || cfg.LevelFactor > max(cfg.FanIn, 2) {
		return fmt.Errorf("AGGREGATOR_LEVEL_FACTOR %d: from 2 to AGGREGATOR_MERGE_FAN_IN (%d)", cfg.LevelFactor, cfg.FanIn)
	}
	a := New(env.DB, env.Blob, cfg, env.Log)
	a.skipped, a.refused, a.gate = skippedCounter(env.Metrics), refusedCounter(env.Metrics), env.Gate
	a.readFailures = readFailuresCounter(env.Metrics)
	a.registerUnreadable(env.Metrics)
	sub, err := bus.Consume(ctx, env.Bus, events.AggregatorReady, a.Ready)
	if err != nil {
		return err
	}
	deleted, err := bus.Consume(ctx, env.Bus, events.AggregatorDeleted, a.Deleted)
	if err != nil {
		sub.Stop(context.WithoutCancel(ctx))
		return err
	}
	// One replica merges at a time (the leader), and keeps the checkpoint
	// that takes again the announcements a database restored to a backup
	// lost (package checkpoint): the indexer's restored registry says they
	// were sent, and the bus never delivers them again. Every replica
	// answers queries.
	keeper := a.Checkpoint(env.Bus, sub, checkpoint.WithLogger(env.Log), checkpoint.WithGate(env.Gate))
	loop := env.AsLeader("aggregator.merge", service.All(
		func(ctx context.Context) error { a.Loop(ctx); return nil }, keeper.Run))
	return env.Serve(ctx, "CDX API", cfg.HTTPAddr, a.Handler(), []service.Loop{loop}, sub.Stop, deleted.Stop)
}

// Checkpoint is the keeper of the checkpoint of sub, the aggregator's
// subscription to announcements (events.AggregatorReady) on b: Ready takes
// a replay as one (an output no newer than the recorded is skipped, a
// withdrawn file's refused).
func (a *Aggregator) Checkpoint(b *bus.Bus, sub *bus.Subscription, opts ...checkpoint.Option) *checkpoint.Keeper {
	return checkpoint.For(a.db, "aggregator.checkpoints", b, sub, events.AggregatorReady, a.Ready, opts...)
}

// refusedCounter registers the counter of refused announcements.
func refusedCounter(reg prometheus.Registerer) prometheus.Counter {
	return counter(reg, prometheus.CounterOpts{Name: "archivist_aggregator_announcements_refused_total",
		Help: "CDX announcements of archive files withdrawn (a tombstone), refused: their captures are never answered."})
}

// skippedCounter registers the counter of skipped announcements.
func skippedCounter(reg prometheus.Registerer) prometheus.Counter {
	return counter(reg, prometheus.CounterOpts{Name: "archivist_aggregator_announcements_skipped_total",
		Help: "CDX announcements not newer than the output recorded for their file (late or replayed)."})
}

// counter makes a counter, registered with reg unless nil.
func counter(reg prometheus.Registerer, opts prometheus.CounterOpts) prometheus.Counter {
	c := prometheus.NewCounter(opts)
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// New is an aggregator over a database holding its schema and a blob store.
func New(db *pgxpool.Pool, bs blob.Store, cfg Config, log *slog.Logger) *Aggregator {
	return &Aggregator{db: db, blob: bs, cfg: cfg, log: log, wake: make(chan struct{}, 1), skipped: skippedCounter(nil), refused: refusedCounter(nil),
		readFailures: readFailuresCounter(nil), clusters: map[string]*cdxindex.Cluster{}, failedAt: map[string]time.Time{},
		points: points(cfg.AccessPoints)}
}

// Aggregator merges outputs and answers queries.
type Aggregator struct {
	// clusters are the live clusters opened for queries, by name (their
	// summaries in memory).
	clustersMu sync.Mutex
	clusters   map[string]*cdxindex.Cluster
	// excl is this replica's copy of the exclusion list.
	excl exclusions

	db   *pgxpool.Pool
	blob blob.Store
	cfg  Config
	log  *slog.Logger
	wake chan struct{}
	// skipped counts announcements older than (or a replay of) the output
	// recorded; refused those of a withdrawn file.
	skipped, refused prometheus.Counter
	// gate pauses the merges while a dependency is down (nil: never).
	gate *fault.Gate
	// readFailures counts the cluster reads that failed; failedAt is when
	// each cluster last failed (degraded.go).
	readFailures prometheus.Counter
	failedMu     sync.Mutex
	failedAt     map[string]time.Time
	// points are the access points, by name.
	points map[string]*point
}

// Ready records a file's new output. The announcement's send time is the
// output's version: a newer one wins, an equal one is a replay, an older one
// (arriving late) is skipped, logged and counted. The same output announced
// again later is not merged again. An output no longer the file's (the one
// a newer output replaced, or a late announcement's) is retired with the
// same transaction: its object is deleted after AGGREGATOR_RETIRE_AFTER,
// once a build that was reading it has ended (they were kept for ever). A
// file withdrawn (a tombstone, however early it came) is refused: its
// announcement is acked, logged with the tombstone's reason and counted,
// its output retired, and nothing of it is answered.
func (a *Aggregator) Ready(ctx context.Context, m *bus.Message[events.IndexCDXReady]) error {
	var applied bool
	var refused string
	err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		if err := lockFile(ctx, tx, m.Event.File); err != nil {
			return err
		}
		var reason string
		var at time.Time
		err := tx.QueryRow(ctx, `SELECT reason, at FROM aggregator.tombstones WHERE file = $1`, m.Event.File).Scan(&reason, &at)
		if err == nil {
			refused = fmt.Sprintf("withdrawn at %s: %s", at.UTC().Format(time.RFC3339), reason)
			_, err := tx.Exec(ctx, `INSERT INTO aggregator.retired (key) SELECT $1 WHERE NOT EXISTS (
				SELECT 1 FROM aggregator.outputs WHERE output = $1) ON CONFLICT DO NOTHING`, m.Event.Output)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var old, oldName *string
		var oldBuild *int64
		if err := tx.QueryRow(ctx, `SELECT output, build, name FROM aggregator.outputs WHERE file = $1 FOR UPDATE`, m.Event.File).Scan(&old, &oldBuild, &oldName); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Lines name their file by its key (events.CDXFileName), which a
		// replay resolves through the path index: one name, one file.
		name := events.CDXFileName(m.Event.File)
		var other string
		err = tx.QueryRow(ctx, `SELECT file FROM aggregator.outputs WHERE name = $1 AND file <> $2 AND NOT withdrawn LIMIT 1`, name, m.Event.File).Scan(&other)
		if err == nil {
			return fault.Permanent(fmt.Errorf("archive file %s is named %s in its CDX lines, as %s already is: a Wayback could not tell their captures apart (withdraw %s)", m.Event.File, name, other, other))
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// A new output is built again (build NULL).
		tag, err := tx.Exec(ctx, `INSERT INTO aggregator.outputs (file, output, lines, version, name) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (file) DO UPDATE SET output = EXCLUDED.output, lines = EXCLUDED.lines, version = EXCLUDED.version, withdrawn = false,
				name = EXCLUDED.name,
				build = CASE WHEN aggregator.outputs.output <> EXCLUDED.output OR aggregator.outputs.withdrawn THEN NULL ELSE aggregator.outputs.build END,
				received_at = CASE WHEN aggregator.outputs.output <> EXCLUDED.output THEN clock_timestamp() ELSE aggregator.outputs.received_at END
			WHERE aggregator.outputs.version < EXCLUDED.version`, m.Event.File, m.Event.Output, m.Event.Lines, m.Envelope.SentAt, name)
		if err != nil {
			return err
		}
		applied = tag.RowsAffected() > 0
		// The replaced output's lines, in the build that holds them (named
		// as they were then), answer no more queries and leave that
		// cluster's next merge.
		if applied && old != nil && *old != m.Event.Output && oldBuild != nil {
			if err := mask(ctx, tx, m.Event.File, *oldName, *oldBuild); err != nil {
				return err
			}
		}
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
	if refused != "" {
		a.refused.Inc()
		a.log.WarnContext(ctx, "announcement of a withdrawn archive file refused", "file", m.Event.File, "output", m.Event.Output,
			"tombstone", refused, "event", m.Envelope.ID)
		return nil
	}
	if !applied {
		a.skipped.Inc()
		a.log.InfoContext(ctx, "announcement not newer than the file's output: skipped", "file", m.Event.File, "output", m.Event.Output,
			"sent_at", m.Envelope.SentAt, "event", m.Envelope.ID)
		return nil
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return nil
}

// lockFile serializes, until tx ends, the announcements and withdrawals of
// one archive file: an announcement that did not see a tombstone being
// made, and a withdrawal that did not see an output being recorded, would
// each commit, and the withdrawn file's lines be answered.
func lockFile(ctx context.Context, tx pgx.Tx, file string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('aggregator.file:' || $1, 0))`, file); err != nil {
		return fmt.Errorf("lock %s: %w", file, err)
	}
	return nil
}

// mask hides a file's lines, named name, in a build.
func mask(ctx context.Context, tx pgx.Tx, file, name string, build int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO aggregator.masks (name, build, file) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		name, build, file)
	if err != nil {
		return fmt.Errorf("mask the lines of %s in build %d: %w", file, build, err)
	}
	return nil
}

// Withdraw takes an archive file out of the index for good, whether or
// not the index holds it yet: its tombstone (with reason) refuses every
// later announcement of it; lines it has answer no query from the moment
// it returns and are left out of the next merge of the cluster holding
// them; its output is retired. It reports whether the index held the file.
// Only Reinstate lets the file back.
func (a *Aggregator) Withdraw(ctx context.Context, file, reason string) (indexed bool, err error) {
	err = pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		if err := lockFile(ctx, tx, file); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO aggregator.tombstones (file, reason) VALUES ($1, $2) ON CONFLICT (file) DO NOTHING`, file, reason); err != nil {
			return fmt.Errorf("tombstone of %s: %w", file, err)
		}
		var output, name string
		var build *int64
		var withdrawn bool
		err := tx.QueryRow(ctx, `SELECT output, build, withdrawn, name FROM aggregator.outputs WHERE file = $1 FOR UPDATE`, file).Scan(&output, &build, &withdrawn, &name)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("withdraw %s: %w", file, err)
		}
		indexed = true
		if withdrawn {
			return nil
		}
		if build != nil {
			if err := mask(ctx, tx, file, name, *build); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE aggregator.outputs SET withdrawn = true, build = NULL WHERE file = $1`, file); err != nil {
			return fmt.Errorf("withdraw %s: %w", file, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO aggregator.retired (key) VALUES ($1) ON CONFLICT DO NOTHING`, output); err != nil {
			return fmt.Errorf("retire the output of %s: %w", file, err)
		}
		return nil
	})
	if err == nil {
		a.log.InfoContext(ctx, "archive file withdrawn from the index", "file", file, "indexed", indexed, "reason", reason)
	}
	return indexed, err
}

// Reinstate removes a file's tombstone (an operator's withdrawal made in
// error): its next announcement (archivist index reset FILE) is taken
// again. It reports whether there was one.
func (a *Aggregator) Reinstate(ctx context.Context, file string) (bool, error) {
	tag, err := a.db.Exec(ctx, `DELETE FROM aggregator.tombstones WHERE file = $1`, file)
	if err != nil {
		return false, fmt.Errorf("reinstate %s: %w", file, err)
	}
	if tag.RowsAffected() > 0 {
		a.log.WarnContext(ctx, "archive file reinstated in the index: its next announcement is taken", "file", file)
	}
	return tag.RowsAffected() > 0, nil
}

// Deleted takes an archive file deleted from the archive (an object
// withdrawn) out of the index for good, as Withdraw does, whether or not
// the index held it yet (a key of another kind leaves a tombstone no
// announcement will ever meet).
func (a *Aggregator) Deleted(ctx context.Context, m *bus.Message[events.ObjectDeleted]) error {
	_, err := a.Withdraw(ctx, m.Event.Object, "deleted from the archive")
	return err
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
			a.log.ErrorContext(ctx, "merge", "err", err)
		}
		if err := a.DeleteRetired(ctx); err != nil && ctx.Err() == nil && !a.gate.Observe(ctx, err) {
			a.log.ErrorContext(ctx, "delete retired clusters and outputs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.wake:
		}
	}
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
		a.log.InfoContext(ctx, "retired generation deleted", "key", k)
	}
	return nil
}
