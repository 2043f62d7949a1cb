// Package catalog keeps the source records: episodes and clips as each
// curating system last described them, versioned by the send time of the
// event that described them.
package catalog

import (
	"context"
	"encoding/json"
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

// upsertSQL is the versioned write of a group of records: one statement
// that inserts each record, or replaces it only if the stored version is
// older, and reports for each whether it wrote and which version was there
// before. The records are written in key order (so two writers lock rows
// in one order) and reported in the order given.
func upsertSQL(k Kind) string {
	t := k.Table()
	return `WITH u AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::int[],
		$8::timestamptz[], $9::timestamptz[], $10::text[], $11::timestamptz[], $12::text[], $13::text[]) WITH ORDINALITY
		AS u(source, id, title, media_key, media_sha256, duration_ms, priority, initial, latest, same_as, version, event_id, producer, n)
),
prior AS (SELECT t.source, t.id, t.version FROM ` + t + ` t JOIN u USING (source, id)),
up AS (
	INSERT INTO ` + t + ` AS t (source, id, title, media_key, media_sha256, duration_ms, priority,
		initial_curated_at, latest_curated_at, same_as, version, event_id, producer)
	SELECT source, id, title, media_key, media_sha256, duration_ms, priority, initial, latest,
		ARRAY(SELECT jsonb_array_elements_text(same_as::jsonb)), version, event_id, producer
	FROM u ORDER BY source, id
	ON CONFLICT (source, id) DO UPDATE SET
		title = EXCLUDED.title, media_key = EXCLUDED.media_key, media_sha256 = EXCLUDED.media_sha256,
		duration_ms = EXCLUDED.duration_ms, priority = EXCLUDED.priority,
		initial_curated_at = EXCLUDED.initial_curated_at, latest_curated_at = EXCLUDED.latest_curated_at,
		same_as = EXCLUDED.same_as, version = EXCLUDED.version, event_id = EXCLUDED.event_id,
		producer = EXCLUDED.producer, updated_at = now()
	WHERE t.version < EXCLUDED.version
	RETURNING t.source, t.id
)
SELECT up.id IS NOT NULL, prior.version FROM u
	LEFT JOIN up ON up.source = u.source AND up.id = u.id
	LEFT JOIN prior ON prior.source = u.source AND prior.id = u.id
ORDER BY u.n`
}

// UpsertMany stores recs (of one kind, with distinct keys) with q under the
// versioning rule, in one statement: newer wins, equal is a replay, older
// is skipped (counted and logged). It returns each record's outcome.
func (c *Catalog) UpsertMany(ctx context.Context, q Querier, recs []Record) ([]Outcome, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	kind := recs[0].Kind
	n := len(recs)
	sources, ids, titles, mediaKeys, shas := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	durations, priorities := make([]int64, n), make([]int32, n)
	initials, latests, versions := make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
	sameAs, eventIDs, producers := make([]string, n), make([]string, n), make([]string, n)
	for i, r := range recs {
		if r.Kind != kind {
			return nil, fmt.Errorf("upsert %s records: %s is a %s", kind, r.Key(), r.Kind)
		}
		sources[i], ids[i], titles[i], mediaKeys[i], shas[i] = r.Source, r.ID, r.Title, r.MediaKey, r.MediaSHA256
		durations[i], priorities[i] = r.DurationMS, r.Priority
		initials[i], latests[i], versions[i] = r.InitialCuratedAt, r.LatestCuratedAt, r.Version
		sameAs[i], eventIDs[i], producers[i] = JSONArray(r.SameAs), r.EventID, r.Producer
	}
	rows, err := q.Query(ctx, upsertSQL(kind), sources, ids, titles, mediaKeys, shas, durations, priorities,
		initials, latests, sameAs, versions, eventIDs, producers)
	if err != nil {
		return nil, fmt.Errorf("upsert %d %s records: %w", n, kind, err)
	}
	out := make([]Outcome, 0, n)
	var wrote bool
	var prior *time.Time
	var stale []string
	if _, err := pgx.ForEachRow(rows, []any{&wrote, &prior}, func() error {
		r := recs[len(out)]
		var o Outcome
		switch {
		case wrote:
			o = Applied
		case prior == nil:
			// A concurrent writer inserted the row after this statement's
			// snapshot: classified below, once the rows are read.
			o = ""
		default:
			o = Classify(*prior, r.Version)
		}
		if o == Stale {
			c.log.InfoContext(ctx, "stale update skipped", "kind", r.Kind, "key", r.Key(), "event", r.EventID, "version", r.Version, "stored_version", prior)
		}
		out = append(out, o)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("upsert %d %s records: %w", n, kind, err)
	}
	for i, o := range out {
		if o == "" {
			cur, err := Get(ctx, q, kind, recs[i].Key())
			if err != nil {
				return nil, err
			}
			if o = Classify(cur.Version, recs[i].Version); o == Applied { // cannot be: the conditional update would have written
				o = Stale
			}
			out[i] = o
		}
		c.updates.WithLabelValues(string(kind), string(out[i])).Inc()
		if out[i] == Stale {
			stale = append(stale, recs[i].Key())
		}
	}
	if len(stale) > 0 {
		if _, err := q.Exec(ctx, `INSERT INTO curator.stale_updates AS s (kind, n, last_key, last_at) VALUES ($1, $2, $3, now())
			ON CONFLICT (kind) DO UPDATE SET n = s.n + EXCLUDED.n, last_key = EXCLUDED.last_key, last_at = EXCLUDED.last_at`,
			string(kind), len(stale), stale[len(stale)-1]); err != nil {
			return nil, fmt.Errorf("count the stale updates of %d %s records: %w", len(stale), kind, err)
		}
	}
	return out, nil
}

// JSONArray is ss as a JSON array, for a column of text arrays sent with
// unnest (a ragged text[][] cannot be sent); SQL reads it back with
// ARRAY(SELECT jsonb_array_elements_text(x::jsonb)).
func JSONArray(ss []string) string {
	if ss == nil {
		ss = []string{}
	}
	b, _ := json.Marshal(ss)
	return string(b)
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

// InGroup runs fn in a transaction whose statements are planned for their
// arguments: a group's statements take arrays of keys (key = ANY($1)), and
// a plan cached for one array (a generic plan, made while a table was
// small) would scan every row of a kind for another; one planned each time
// reads the index for the keys given, whatever the archive holds.
func InGroup(ctx context.Context, db *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_custom_plan`); err != nil {
			return fmt.Errorf("plan for the group's keys: %w", err)
		}
		return fn(tx)
	})
}
