// Package research is the data of research work assignment
// (tbtl-work-assignment.txt), shared by its two deployables: the pwa, which
// keeps episodes and clips and leases work, and the cwa, which stores results
// and extends and revokes leases. Every change of state is one transaction.
package research

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/telemetry"
)

// Store is the research schema.
type Store struct {
	db  *pgxpool.Pool
	cfg Config
}

// Option configures a Store.
type Option func(*Store)

// WithConfig sets the research configuration whose retry bounds the store
// applies (RESEARCH_RETRY_BASE, RESEARCH_MAX_ATTEMPTS, ...); the default
// is every variable's default.
func WithConfig(cfg Config) Option { return func(s *Store) { s.cfg = cfg } }

// DefaultConfig is the research configuration with every default.
func DefaultConfig() Config {
	return Config{LeaseDuration: 10 * time.Minute, ItemTTL: 5 * time.Minute, MaxClips: 8, LivenessTTL: 30 * time.Second,
		RetryBase: time.Minute, RetryMax: time.Hour, MaxAttempts: 5, MediaWait: 24 * time.Hour}
}

// New returns the store on db.
func New(db *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{db: db, cfg: DefaultConfig()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DB is the store's pool.
func (s *Store) DB() *pgxpool.Pool { return s.db }

// Outcome of a versioned write.
type Outcome string

// Outcomes of a versioned write.
const (
	Applied Outcome = "applied"
	Replay  Outcome = "replay"
	Stale   Outcome = "stale"
)

// ApplyWork stores a merged work (an episode or a clip) from the curator:
// newer version wins, equal is a replay, older is skipped. Only works in
// state "work" are researched; a redirect or gone key is kept inactive.
// It says which media the change retired: the sha256 the work named
// before, when its media changed to other bytes or the work is gone, and
// no active work names it any more (what researchers derived from it can
// be discarded).
func (s *Store) ApplyWork(ctx context.Context, w *events.WorkUpserted) (Outcome, *events.MediaRetired, error) {
	var retired *events.MediaRetired
	// A work whose media changes is researched again (a parked episode
	// too): the change is timed, so that results of older leases are
	// refused, and the work's results and pairs are deleted below.
	// A work that goes inactive (a redirect, gone) keeps its media and its
	// results: they carry over to the work it was merged into.
	//
	// The media changes when its bytes do: when both sha256s are known,
	// they decide (a file moved to another key is the same audio, and its
	// research stands); else the key and the sha256 together.
	const mediaDiffers = `(EXCLUDED.active AND ` + mediaChangedSQL + `)`
	table, unpark := "research.episodes", `, parked_reason = CASE WHEN `+mediaDiffers+` THEN NULL ELSE t.parked_reason END`
	if w.Kind == events.KindClip {
		table, unpark = "research.clips", ""
	}
	// The change is timed after the works lock is granted (not at the
	// transaction's start): every lease made before it is older.
	unpark += `, media_changed_at = CASE WHEN ` + mediaDiffers + ` THEN clock_timestamp() ELSE t.media_changed_at END`
	active := w.State == events.WorkMerged
	var out Outcome
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// Works changes are serialised: an episode that arrives counts the
		// active clips it can see, a clip that arrives adds itself to the
		// episodes it can see, and two such transactions running side by
		// side would each miss the other.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+worksLock+`)`); err != nil {
			return fmt.Errorf("lock works changes: %w", err)
		}
		var id int64
		var wasActive *bool
		var prior *time.Time
		var priorKey, priorSHA *string
		err := tx.QueryRow(ctx, `WITH prior AS (SELECT active, version, media_key, media_sha256 FROM `+table+` WHERE key = $1),
up AS (
	INSERT INTO `+table+` AS t (key, active, title, media_key, media_sha256, duration_ms, priority, initial_curated_at, version, traceparent)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
	ON CONFLICT (key) DO UPDATE SET active = EXCLUDED.active, title = EXCLUDED.title,
		media_key = CASE WHEN EXCLUDED.active THEN EXCLUDED.media_key ELSE t.media_key END,
		media_sha256 = CASE WHEN EXCLUDED.active THEN EXCLUDED.media_sha256 ELSE t.media_sha256 END,
		duration_ms = EXCLUDED.duration_ms, priority = EXCLUDED.priority,
		initial_curated_at = EXCLUDED.initial_curated_at, version = EXCLUDED.version, traceparent = EXCLUDED.traceparent`+unpark+`
	WHERE t.version < EXCLUDED.version
	RETURNING id
)
SELECT coalesce((SELECT id FROM up), 0), (SELECT active FROM prior), (SELECT version FROM prior),
	(SELECT media_key FROM prior), (SELECT media_sha256 FROM prior)`,
			w.Key, active, w.Title, w.Media.Key, w.Media.SHA256, w.DurationMS, w.Priority, initialOf(w), w.Version, telemetry.Traceparent(ctx)).
			Scan(&id, &wasActive, &prior, &priorKey, &priorSHA)
		if err != nil {
			return fmt.Errorf("upsert %s %s: %w", w.Kind, w.Key, err)
		}
		if id == 0 {
			out = Stale
			if prior != nil && prior.Equal(w.Version) {
				out = Replay
			}
			return nil
		}
		out = Applied
		if active && priorKey != nil && MediaChanged(events.Media{Key: *priorKey, SHA256: derefString(priorSHA)}, w.Media) {
			if err := forgetResearch(ctx, tx, w.Kind, id); err != nil {
				return err
			}
		}
		// The media the work named before, retired if no active work
		// names it now (this one's new version included).
		old := derefString(priorSHA)
		reason := ""
		switch {
		case old == "" || wasActive == nil || !*wasActive:
		case active && old != w.Media.SHA256:
			reason = events.RetiredMediaChanged
		case w.State == events.WorkGone:
			reason = events.RetiredGone
		}
		if reason != "" {
			var named bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM research.episodes WHERE active AND media_sha256 = $1)
				OR EXISTS (SELECT 1 FROM research.clips WHERE active AND media_sha256 = $1)`, old).Scan(&named); err != nil {
				return fmt.Errorf("is media %s still named: %w", old, err)
			}
			if !named {
				retired = &events.MediaRetired{SHA256: old, Work: w.Key, Reason: reason}
			}
		}
		// A new work changes counters only if it is active: a clip key
		// first seen as a redirect or gone counts in no episode.
		changed := wasActive == nil && active || wasActive != nil && *wasActive != active
		if changed {
			if w.Kind == events.KindEpisode {
				err = recountEpisode(ctx, tx, id)
			} else {
				err = clipActivity(ctx, tx, id, active)
			}
			if err != nil {
				return err
			}
		}
		// Research done on works merged into another carries over to it
		// when both have the same media: from a redirect to its work as it
		// arrives, or to a work from its members (whichever comes last).
		if w.State == events.WorkRedirect && w.RedirectTo != "" {
			return carryOver(ctx, tx, w.Kind, w.Key, w.RedirectTo)
		}
		if active {
			for _, m := range w.Members {
				if m != w.Key {
					if err := carryOver(ctx, tx, w.Kind, m, w.Key); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		retired = nil
	}
	return out, retired, err
}

// mediaChangedSQL is MediaChanged of the row t and the incoming EXCLUDED.
const mediaChangedSQL = `(CASE WHEN t.media_sha256 <> '' AND EXCLUDED.media_sha256 <> '' THEN t.media_sha256 <> EXCLUDED.media_sha256
	ELSE t.media_key IS DISTINCT FROM EXCLUDED.media_key OR t.media_sha256 IS DISTINCT FROM EXCLUDED.media_sha256 END)`

// MediaChanged reports whether a work's media changed from was to now: its
// bytes, by sha256 when both are known (a file moved to another key is the
// same audio), else its key or sha256.
func MediaChanged(was, now events.Media) bool {
	if was.SHA256 != "" && now.SHA256 != "" {
		return was.SHA256 != now.SHA256
	}
	return was.Key != now.Key || was.SHA256 != now.SHA256
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// worksLock serialises changes of works (exclusive) against leases
// (shared): a lease reads its episode's and clips' media either before a
// change commits (and the change then forgets the lease's pairs, and
// refuses its results as older than the change) or after it.
const worksLock = `hashtext('archivist.research.works')`

// forgetResearch deletes the results and pairs of a work whose media
// changed, and recounts the episodes concerned, so that it is leased and
// researched again from its new audio. Leases in flight are left to end;
// their results are refused as stale (StoreResult).
func forgetResearch(ctx context.Context, tx pgx.Tx, kind string, id int64) error {
	col := "episode_id"
	if kind == events.KindClip {
		col = "clip_id"
	}
	if _, err := tx.Exec(ctx, `DELETE FROM research.results WHERE `+col+` = $1`, id); err != nil {
		return fmt.Errorf("forget the results of %s %d: %w", kind, id, err)
	}
	rows, err := tx.Query(ctx, `DELETE FROM research.pairs WHERE `+col+` = $1 RETURNING episode_id`, id)
	if err != nil {
		return fmt.Errorf("forget the pairs of %s %d: %w", kind, id, err)
	}
	episodes, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("forget the pairs of %s %d: %w", kind, id, err)
	}
	if kind == events.KindEpisode {
		episodes = []int64{id}
	}
	if _, err := tx.Exec(ctx, recountSQL+` WHERE e.id = ANY($1)`, episodes); err != nil {
		return fmt.Errorf("recount after the media of %s %d changed: %w", kind, id, err)
	}
	return nil
}

// carryOver copies the results (and pair states) of the inactive work from
// to the active work to, when both have the same media (the same sha256;
// without both, the same key and sha256),
// and recounts the episodes that gained them: research is not done twice
// for audio already researched under another key.
func carryOver(ctx context.Context, tx pgx.Tx, kind, from, to string) error {
	table, own, other := "research.episodes", "episode_id", "clip_id"
	if kind == events.KindClip {
		table, own, other = "research.clips", "clip_id", "episode_id"
	}
	rows, err := tx.Query(ctx, `WITH src AS (SELECT id, media_key, media_sha256 FROM `+table+` WHERE key = $1 AND NOT active),
dst AS (SELECT d.id FROM `+table+` d, src WHERE d.key = $2 AND d.active AND d.media_key <> ''
	AND (CASE WHEN d.media_sha256 <> '' AND src.media_sha256 <> '' THEN d.media_sha256 = src.media_sha256
		ELSE d.media_key = src.media_key AND d.media_sha256 = src.media_sha256 END)),
res AS (
	INSERT INTO research.results (`+own+`, `+other+`, lease_id, researcher, occurrences, failure, miss, stored_at)
	SELECT dst.id, r.`+other+`, r.lease_id, r.researcher, r.occurrences, r.failure, r.miss, r.stored_at
	FROM research.results r, src, dst WHERE r.`+own+` = src.id
	ON CONFLICT DO NOTHING RETURNING `+other+` AS other, failure
)
INSERT INTO research.pairs (`+own+`, `+other+`, state)
SELECT dst.id, res.other, CASE WHEN res.failure IS NULL THEN 'researched' ELSE 'failed' END FROM res, dst
ON CONFLICT (episode_id, clip_id) DO UPDATE SET state = EXCLUDED.state, lease_id = NULL WHERE research.pairs.state = 'leased'
RETURNING episode_id`, from, to)
	if err != nil {
		return fmt.Errorf("carry the research of %s %s over to %s: %w", kind, from, to, err)
	}
	episodes, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("carry the research of %s %s over to %s: %w", kind, from, to, err)
	}
	if len(episodes) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, recountSQL+` WHERE e.id = ANY($1)`, episodes); err != nil {
		return fmt.Errorf("recount after carrying %s %s over to %s: %w", kind, from, to, err)
	}
	return nil
}

func initialOf(w *events.WorkUpserted) time.Time {
	if w.InitialCuratedAt.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return w.InitialCuratedAt
}

// notDue is true of a pair that keeps its clip from being open for its
// episode: every pair but a waiting one that is due again (retry_at NULL).
const notDue = `NOT (p.state = 'waiting' AND p.retry_at IS NULL)`

const recountSQL = `UPDATE research.episodes e SET
	open_clips = CASE WHEN e.active THEN (SELECT count(*) FROM research.clips c WHERE c.active
		AND NOT EXISTS (SELECT 1 FROM research.pairs p WHERE p.episode_id = e.id AND p.clip_id = c.id AND ` + notDue + `)) ELSE 0 END,
	researched_clips = (SELECT count(*) FROM research.pairs p JOIN research.clips c ON c.id = p.clip_id AND c.active
		WHERE p.episode_id = e.id AND p.state = 'researched')`

func recountEpisode(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := tx.Exec(ctx, recountSQL+` WHERE e.id = $1`, id); err != nil {
		return fmt.Errorf("recount episode %d: %w", id, err)
	}
	return nil
}

// clipActivity adjusts every episode's counters for a clip that became
// active or inactive.
func clipActivity(ctx context.Context, tx pgx.Tx, clipID int64, active bool) error {
	sign := 1
	if !active {
		sign = -1
	}
	if _, err := tx.Exec(ctx, `UPDATE research.episodes e SET
		open_clips = e.open_clips + $2 * (CASE WHEN e.active AND NOT EXISTS
			(SELECT 1 FROM research.pairs p WHERE p.episode_id = e.id AND p.clip_id = $1 AND `+notDue+`) THEN 1 ELSE 0 END),
		researched_clips = e.researched_clips + $2 * (CASE WHEN EXISTS
			(SELECT 1 FROM research.pairs p WHERE p.episode_id = e.id AND p.clip_id = $1 AND p.state = 'researched') THEN 1 ELSE 0 END)`,
		clipID, sign); err != nil {
		return fmt.Errorf("clip %d activity: %w", clipID, err)
	}
	return nil
}

// Recount recomputes every episode's counters from the pairs: the
// reconciliation that repairs any drift a crash or a race left. It works in
// batches, each locking its episodes first so that the counts are read after
// every concurrent change of those episodes has committed or waits for them
// (a single UPDATE would read the pairs from before a concurrent result and
// overwrite its increment).
func (s *Store) Recount(ctx context.Context) error {
	var last int64
	for {
		done := false
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id FROM research.episodes WHERE id > $1 ORDER BY id LIMIT 500 FOR UPDATE`, last)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				done = true
				return nil
			}
			last = ids[len(ids)-1]
			_, err = tx.Exec(ctx, recountSQL+` WHERE e.id = ANY ($1)`, ids)
			return err
		})
		if err != nil {
			return fmt.Errorf("recount episodes: %w", err)
		}
		if done {
			return nil
		}
	}
}
