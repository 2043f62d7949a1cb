// Package catalog keeps the source records: episodes and clips as each
// curating system last described them, versioned by the send time of the
// event that described them.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
)

// Kind is what a record is: events.KindEpisode or events.KindClip.
type Kind string

// Kinds of records.
const (
	Episode Kind = events.KindEpisode
	Clip    Kind = events.KindClip
)

// Table is the kind's source-record table.
func (k Kind) Table() string {
	if k == Clip {
		return "curator.clips"
	}
	return "curator.episodes"
}

// Outcome is what a versioned write did.
type Outcome string

// Outcomes of a versioned write.
const (
	// Applied: the event was newer than the stored record (or there was none).
	Applied Outcome = "applied"
	// Replay: the stored record has the same version; nothing changed.
	Replay Outcome = "replay"
	// Stale: the stored record is newer; the event was skipped.
	Stale Outcome = "stale"
)

// Classify is the outcome of a write of version incoming over stored.
func Classify(stored, incoming time.Time) Outcome {
	switch {
	case stored.Before(incoming):
		return Applied
	case stored.Equal(incoming):
		return Replay
	default:
		return Stale
	}
}

// Record is a stored episode or clip of one source.
type Record struct {
	Kind             Kind      `json:"kind"`
	Source           string    `json:"source"`
	ID               string    `json:"id"`
	Title            string    `json:"title"`
	MediaKey         string    `json:"media_key"`
	MediaSHA256      string    `json:"media_sha256"`
	DurationMS       int64     `json:"duration_ms"`
	Priority         int32     `json:"priority"`
	InitialCuratedAt time.Time `json:"initial_curated_at"`
	LatestCuratedAt  time.Time `json:"latest_curated_at"`
	SameAs           []string  `json:"same_as"`
	Version          time.Time `json:"version"`
	EventID          string    `json:"event_id"`
	Producer         string    `json:"producer"`
}

// Key is the record's key, "source:id".
func (r Record) Key() string { return r.Source + ":" + r.ID }

// Querier runs statements: a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Catalog is the curator's store of source records.
type Catalog struct {
	db      *pgxpool.Pool
	log     *slog.Logger
	updates *prometheus.CounterVec
}

// New returns a catalog on db, registering its metrics with reg.
func New(db *pgxpool.Pool, reg prometheus.Registerer, log *slog.Logger) *Catalog {
	c := &Catalog{db: db, log: log, updates: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archivist_curator_updates_total",
		Help: "Curation updates by kind (episode, clip) and outcome (applied, replay, stale).",
	}, []string{"kind", "outcome"})}
	if reg != nil {
		reg.MustRegister(c.updates)
	}
	return c
}

// DB is the catalog's pool.
func (c *Catalog) DB() *pgxpool.Pool { return c.db }

// FromEpisode is the record an EpisodeUpserted event describes.
func FromEpisode(env events.Envelope, e *events.EpisodeUpserted) Record {
	return fromCurated(Episode, env, (*events.CuratedAudio)(e))
}

// FromClip is the record a ClipUpserted event describes.
func FromClip(env events.Envelope, c *events.ClipUpserted) Record {
	return fromCurated(Clip, env, (*events.CuratedAudio)(c))
}

func fromCurated(k Kind, env events.Envelope, a *events.CuratedAudio) Record {
	source := a.Source
	if source == "" {
		source = env.Producer
	}
	sameAs := make([]string, 0, len(a.SameAs))
	for _, r := range a.SameAs {
		if key := r.Key(); key != source+":"+a.ID {
			sameAs = append(sameAs, key)
		}
	}
	return Record{Kind: k, Source: source, ID: a.ID, Title: a.Title, MediaKey: a.Media.Key, MediaSHA256: a.Media.SHA256,
		DurationMS: a.DurationMS, Priority: a.Priority, InitialCuratedAt: a.InitialCuratedAt, LatestCuratedAt: a.LatestCuratedAt,
		SameAs: sameAs, Version: env.SentAt, EventID: env.ID, Producer: env.Producer}
}

// upsertSQL is the versioned write: one statement that inserts the record,
// or replaces it only if the stored version is older, and reports whether
// it wrote and which version was there before.
func upsertSQL(k Kind) string {
	t := k.Table()
	return `WITH prior AS (SELECT version FROM ` + t + ` WHERE source = $1 AND id = $2),
up AS (
	INSERT INTO ` + t + ` AS t (source, id, title, media_key, media_sha256, duration_ms, priority,
		initial_curated_at, latest_curated_at, same_as, version, event_id, producer)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
	ON CONFLICT (source, id) DO UPDATE SET
		title = EXCLUDED.title, media_key = EXCLUDED.media_key, media_sha256 = EXCLUDED.media_sha256,
		duration_ms = EXCLUDED.duration_ms, priority = EXCLUDED.priority,
		initial_curated_at = EXCLUDED.initial_curated_at, latest_curated_at = EXCLUDED.latest_curated_at,
		same_as = EXCLUDED.same_as, version = EXCLUDED.version, event_id = EXCLUDED.event_id,
		producer = EXCLUDED.producer, updated_at = now()
	WHERE t.version < EXCLUDED.version
	RETURNING 1
)
SELECT (SELECT count(*) FROM up), (SELECT version FROM prior)`
}

// Upsert stores r with q under the versioning rule: newer wins, equal is a
// replay, older is skipped (counted and logged).
func (c *Catalog) Upsert(ctx context.Context, q Querier, r Record) (Outcome, error) {
	var wrote int
	var prior *time.Time
	sameAs := r.SameAs
	if sameAs == nil {
		sameAs = []string{}
	}
	err := q.QueryRow(ctx, upsertSQL(r.Kind), r.Source, r.ID, r.Title, r.MediaKey, r.MediaSHA256, r.DurationMS, r.Priority,
		r.InitialCuratedAt, r.LatestCuratedAt, sameAs, r.Version, r.EventID, r.Producer).Scan(&wrote, &prior)
	if err != nil {
		return "", fmt.Errorf("upsert %s %s: %w", r.Kind, r.Key(), err)
	}
	var out Outcome
	switch {
	case wrote == 1:
		out = Applied
	case prior == nil:
		// A concurrent writer inserted the row after this statement's
		// snapshot; read what won.
		cur, err := Get(ctx, q, r.Kind, r.Key())
		if err != nil {
			return "", err
		}
		out = Classify(cur.Version, r.Version)
		if out == Applied { // cannot be: the conditional update would have written
			out = Stale
		}
	default:
		out = Classify(*prior, r.Version)
	}
	c.updates.WithLabelValues(string(r.Kind), string(out)).Inc()
	if out == Stale {
		c.log.InfoContext(ctx, "stale update skipped", "kind", r.Kind, "key", r.Key(), "event", r.EventID, "version", r.Version, "stored_version", prior)
		if _, err := q.Exec(ctx, `INSERT INTO curator.stale_updates AS s (kind, n, last_key, last_at) VALUES ($1, 1, $2, now())
			ON CONFLICT (kind) DO UPDATE SET n = s.n + 1, last_key = EXCLUDED.last_key, last_at = EXCLUDED.last_at`, string(r.Kind), r.Key()); err != nil {
			return "", fmt.Errorf("count the stale update of %s %s: %w", r.Kind, r.Key(), err)
		}
	}
	return out, nil
}

// Status is curation at a glance: source records by kind and source, works
// by kind and state, and stale updates by kind.
type Status struct {
	Records map[string]map[string]int64 `json:"records"`
	Works   map[string]map[string]int64 `json:"works"`
	Stale   map[string]StaleCount       `json:"stale_updates"`
}

// StaleCount counts the stale updates of a kind, with the last one's key.
type StaleCount struct {
	N       int64     `json:"n"`
	LastKey string    `json:"last_key"`
	LastAt  time.Time `json:"last_at"`
}

// Status reads the curation status in one snapshot.
func (c *Catalog) Status(ctx context.Context) (Status, error) {
	st := Status{Records: map[string]map[string]int64{}, Works: map[string]map[string]int64{}, Stale: map[string]StaleCount{}}
	err := pgx.BeginTxFunc(ctx, c.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		add := func(m map[string]map[string]int64, sql string) error {
			rows, err := tx.Query(ctx, sql)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var kind, k string
				var n int64
				if err := rows.Scan(&kind, &k, &n); err != nil {
					return err
				}
				if m[kind] == nil {
					m[kind] = map[string]int64{}
				}
				m[kind][k] = n
			}
			return rows.Err()
		}
		if err := add(st.Records, `SELECT 'episode', source, count(*) FROM curator.episodes GROUP BY source
			UNION ALL SELECT 'clip', source, count(*) FROM curator.clips GROUP BY source`); err != nil {
			return err
		}
		if err := add(st.Works, `SELECT kind, state, count(*) FROM curator.works GROUP BY kind, state`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT kind, n, last_key, last_at FROM curator.stale_updates`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind string
			var sc StaleCount
			if err := rows.Scan(&kind, &sc.N, &sc.LastKey, &sc.LastAt); err != nil {
				return err
			}
			st.Stale[kind] = sc
		}
		return rows.Err()
	})
	if err != nil {
		return st, fmt.Errorf("curation status: %w", err)
	}
	return st, nil
}

// ErrNotFound is returned by Get for an unknown key.
var ErrNotFound = errors.New("not found")

const recordColumns = `source, id, title, media_key, media_sha256, duration_ms, priority,
	initial_curated_at, latest_curated_at, same_as, version, event_id, producer`

func scanRecord(k Kind) pgx.RowToFunc[Record] {
	return func(row pgx.CollectableRow) (Record, error) {
		r := Record{Kind: k}
		err := row.Scan(&r.Source, &r.ID, &r.Title, &r.MediaKey, &r.MediaSHA256, &r.DurationMS, &r.Priority,
			&r.InitialCuratedAt, &r.LatestCuratedAt, &r.SameAs, &r.Version, &r.EventID, &r.Producer)
		r.Version, r.InitialCuratedAt, r.LatestCuratedAt = r.Version.UTC(), r.InitialCuratedAt.UTC(), r.LatestCuratedAt.UTC()
		return r, err
	}
}

// Get reads the record with key "source:id".
func Get(ctx context.Context, q Querier, k Kind, key string) (Record, error) {
	rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM `+k.Table()+` WHERE key = $1`, key)
	if err != nil {
		return Record{}, fmt.Errorf("get %s %s: %w", k, key, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRecord(k))
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("%s %s: %w", k, key, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get %s %s: %w", k, key, err)
	}
	return r, nil
}

// GetMany reads the records with the given keys (missing keys are left out),
// in key order.
func GetMany(ctx context.Context, q Querier, k Kind, keys []string) ([]Record, error) {
	rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM `+k.Table()+` WHERE key = ANY($1) ORDER BY key`, keys)
	if err != nil {
		return nil, fmt.Errorf("get %s records: %w", k, err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord(k))
	if err != nil {
		return nil, fmt.Errorf("get %s records: %w", k, err)
	}
	return recs, nil
}

// Get reads a stored record by key from the catalog's pool.
func (c *Catalog) Get(ctx context.Context, k Kind, key string) (Record, error) {
	return Get(ctx, c.db, k, key)
}
