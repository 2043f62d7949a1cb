// Package catalog keeps the episodes and clips that curating systems
// describe, versioned by the send time of the event that described them.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
)

// Kind is what a record is: an episode or a clip.
type Kind string

// Kinds of records, also their table names in the curator schema.
const (
	Episode Kind = "episodes"
	Clip    Kind = "clips"
)

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

// Record is a stored episode or clip.
type Record struct {
	Kind             Kind      `json:"kind"`
	ID               string    `json:"id"`
	Title            string    `json:"title"`
	MediaKey         string    `json:"media_key"`
	MediaSHA256      string    `json:"media_sha256"`
	DurationMS       int64     `json:"duration_ms"`
	Priority         int32     `json:"priority"`
	InitialCuratedAt time.Time `json:"initial_curated_at"`
	LatestCuratedAt  time.Time `json:"latest_curated_at"`
	Version          time.Time `json:"version"`
	EventID          string    `json:"event_id"`
	Producer         string    `json:"producer"`
}

// Catalog is the curator's store of episodes and clips.
type Catalog struct {
	db      *pgxpool.Pool
	log     *slog.Logger
	updates *prometheus.CounterVec
}

// New returns a catalog on db, registering its metrics with reg.
func New(db *pgxpool.Pool, reg prometheus.Registerer, log *slog.Logger) *Catalog {
	c := &Catalog{db: db, log: log, updates: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archivist_curator_updates_total",
		Help: "Curation updates by kind (episodes, clips) and outcome (applied, replay, stale).",
	}, []string{"kind", "outcome"})}
	if reg != nil {
		reg.MustRegister(c.updates)
	}
	return c
}

// FromEpisode is the record an EpisodeUpserted event describes.
func FromEpisode(env events.Envelope, e *events.EpisodeUpserted) Record {
	return fromCurated(Episode, env, (*events.CuratedAudio)(e))
}

// FromClip is the record a ClipUpserted event describes.
func FromClip(env events.Envelope, c *events.ClipUpserted) Record {
	return fromCurated(Clip, env, (*events.CuratedAudio)(c))
}

func fromCurated(k Kind, env events.Envelope, a *events.CuratedAudio) Record {
	return Record{Kind: k, ID: a.ID, Title: a.Title, MediaKey: a.Media.Key, MediaSHA256: a.Media.SHA256,
		DurationMS: a.DurationMS, Priority: a.Priority, InitialCuratedAt: a.InitialCuratedAt, LatestCuratedAt: a.LatestCuratedAt,
		Version: env.SentAt, EventID: env.ID, Producer: env.Producer}
}

// upsertSQL is the versioned write: one statement that inserts the record,
// or replaces it only if the stored version is older, and reports whether
// it wrote and which version was there before.
func upsertSQL(k Kind) string {
	t := "curator." + string(k)
	return `WITH prior AS (SELECT version FROM ` + t + ` WHERE id = $1),
up AS (
	INSERT INTO ` + t + ` AS t (id, title, media_key, media_sha256, duration_ms, priority,
		initial_curated_at, latest_curated_at, version, event_id, producer)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (id) DO UPDATE SET
		title = EXCLUDED.title, media_key = EXCLUDED.media_key, media_sha256 = EXCLUDED.media_sha256,
		duration_ms = EXCLUDED.duration_ms, priority = EXCLUDED.priority,
		initial_curated_at = EXCLUDED.initial_curated_at, latest_curated_at = EXCLUDED.latest_curated_at,
		version = EXCLUDED.version, event_id = EXCLUDED.event_id, producer = EXCLUDED.producer,
		updated_at = now()
	WHERE t.version < EXCLUDED.version
	RETURNING 1
)
SELECT (SELECT count(*) FROM up), (SELECT version FROM prior)`
}

// Upsert stores r under the versioning rule: newer wins, equal is a replay,
// older is skipped (counted and logged).
func (c *Catalog) Upsert(ctx context.Context, r Record) (Outcome, error) {
	var wrote int
	var prior *time.Time
	err := c.db.QueryRow(ctx, upsertSQL(r.Kind), r.ID, r.Title, r.MediaKey, r.MediaSHA256, r.DurationMS, r.Priority,
		r.InitialCuratedAt, r.LatestCuratedAt, r.Version, r.EventID, r.Producer).Scan(&wrote, &prior)
	if err != nil {
		return "", fmt.Errorf("upsert %s %s: %w", r.Kind, r.ID, err)
	}
	var out Outcome
	switch {
	case wrote == 1:
		out = Applied
	case prior == nil:
		// A concurrent writer inserted the row after this statement's
		// snapshot; read what won.
		cur, err := c.Get(ctx, r.Kind, r.ID)
		if err != nil {
			return "", err
		}
		out = classify(cur.Version, r.Version)
	default:
		out = classify(*prior, r.Version)
	}
	c.updates.WithLabelValues(string(r.Kind), string(out)).Inc()
	if out == Stale {
		c.log.Info("stale update skipped", "kind", r.Kind, "id", r.ID, "event", r.EventID, "version", r.Version, "stored_version", prior)
	}
	return out, nil
}

func classify(stored, incoming time.Time) Outcome {
	if stored.Equal(incoming) {
		return Replay
	}
	return Stale
}

// ErrNotFound is returned by Get for an unknown id.
var ErrNotFound = errors.New("not found")

// Get reads a stored record.
func (c *Catalog) Get(ctx context.Context, k Kind, id string) (Record, error) {
	rows, err := c.db.Query(ctx, `SELECT id, title, media_key, media_sha256, duration_ms, priority,
		initial_curated_at, latest_curated_at, version, event_id, producer
		FROM curator.`+string(k)+` WHERE id = $1`, id)
	if err != nil {
		return Record{}, fmt.Errorf("get %s %s: %w", k, id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (Record, error) {
		r := Record{Kind: k}
		err := row.Scan(&r.ID, &r.Title, &r.MediaKey, &r.MediaSHA256, &r.DurationMS, &r.Priority,
			&r.InitialCuratedAt, &r.LatestCuratedAt, &r.Version, &r.EventID, &r.Producer)
		return r, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("%s %s: %w", k, id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get %s %s: %w", k, id, err)
	}
	r.Version, r.InitialCuratedAt, r.LatestCuratedAt = r.Version.UTC(), r.InitialCuratedAt.UTC(), r.LatestCuratedAt.UTC()
	return r, nil
}
