package research

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/work"
)

// Lease is leased work: an episode and its clips, until ExpiresAt.
type Lease struct {
	ID        string
	Episode   events.AudioRef
	Clips     []events.AudioRef
	ExpiresAt time.Time
	// Traceparent is the episode's trace (the works message that last
	// changed it), "" when none was kept: the work item continues it.
	Traceparent string
}

// Lease selects work and leases it in one transaction: the first episode
// with open clips by priority (descending), then initial curation date
// (newest first), that no other transaction is leasing; then that episode's
// open clips in the same order, at most maxClips. It returns nil when there
// is no work. Two transactions never lease one (episode, clip): the episode
// row is locked (others skip it), and a pair row is the lease's claim.
func (s *Store) Lease(ctx context.Context, maxClips int, duration time.Duration) (*Lease, error) {
	for range 3 {
		l, retry, err := s.leaseOnce(ctx, maxClips, duration)
		if err != nil || !retry {
			return l, err
		}
	}
	return nil, nil
}

func (s *Store) leaseOnce(ctx context.Context, maxClips int, duration time.Duration) (*Lease, bool, error) {
	var lease *Lease
	retry := false
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// Leases share the works lock; a change of works holds it alone.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+worksLock+`)`); err != nil {
			return fmt.Errorf("lock works against changes: %w", err)
		}
		var epID int64
		var ep events.AudioRef
		var tp string
		err := tx.QueryRow(ctx, `SELECT id, key, media_key, media_sha256, duration_ms, traceparent FROM research.episodes
			WHERE active AND open_clips > 0 AND parked_reason IS NULL AND next_attempt_at <= now()
			ORDER BY priority DESC, initial_curated_at DESC, id
			LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&epID, &ep.Key, &ep.Media.Key, &ep.Media.SHA256, &ep.DurationMS, &tp)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("select episode: %w", err)
		}
		id := uuid.New()
		rows, err := tx.Query(ctx, `WITH cand AS (
	SELECT c.id FROM research.clips c
	WHERE c.active AND NOT EXISTS (SELECT 1 FROM research.pairs p WHERE p.episode_id = $1 AND p.clip_id = c.id AND `+notDue+`)
	ORDER BY c.priority DESC, c.initial_curated_at DESC, c.id
	LIMIT $2
), ins AS (
	INSERT INTO research.pairs AS p (episode_id, clip_id, state, lease_id)
	SELECT $1, id, 'leased', $3 FROM cand
	ON CONFLICT (episode_id, clip_id) DO UPDATE SET state = 'leased', lease_id = $3 WHERE p.state = 'waiting' AND p.retry_at IS NULL
	RETURNING clip_id
), lease AS (
	INSERT INTO research.leases (id, episode_id, clip_ids, created_at, expires_at)
	SELECT $3, $1, array_agg(clip_id), clock_timestamp(), clock_timestamp() + $4::interval FROM ins HAVING count(*) > 0
	RETURNING expires_at, clip_ids
), upd AS (
	-- The lease is an attempt of its episode, counted as it is handed out.
	UPDATE research.episodes SET open_clips = greatest(open_clips - (SELECT count(*) FROM ins), 0), leases = leases + 1 WHERE id = $1
), used AS (
	-- The audio it names is in use now: its prints are kept
	-- PWA_PRINT_RETENTION from here (made again if they were retired).
	INSERT INTO research.media_use AS u (sha256, work, used_at)
	SELECT DISTINCT ON (sha256) sha256, work, now() FROM (
		SELECT media_sha256 AS sha256, key AS work FROM research.episodes WHERE id = $1 AND EXISTS (SELECT 1 FROM ins)
		UNION ALL
		SELECT c.media_sha256, c.key FROM research.clips c JOIN ins ON c.id = ins.clip_id
	) m WHERE sha256 <> '' ORDER BY sha256
	ON CONFLICT (sha256) DO UPDATE SET work = excluded.work, used_at = excluded.used_at, retired_at = NULL
)
SELECT l.expires_at, c.key, c.media_key, c.media_sha256, c.duration_ms
FROM lease l JOIN research.clips c ON c.id = ANY (l.clip_ids)
ORDER BY c.priority DESC, c.initial_curated_at DESC, c.id`, epID, maxClips, id, duration)
		if err != nil {
			return fmt.Errorf("lease clips of %s: %w", ep.Key, err)
		}
		l := &Lease{ID: id.String(), Episode: ep, Traceparent: tp}
		for rows.Next() {
			var c events.AudioRef
			if err := rows.Scan(&l.ExpiresAt, &c.Key, &c.Media.Key, &c.Media.SHA256, &c.DurationMS); err != nil {
				rows.Close()
				return fmt.Errorf("lease clips of %s: %w", ep.Key, err)
			}
			l.Clips = append(l.Clips, c)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lease clips of %s: %w", ep.Key, err)
		}
		if len(l.Clips) == 0 {
			// The counter said open, the pairs say not: repair and try again.
			retry = true
			return recountEpisode(ctx, tx, epID)
		}
		l.ExpiresAt = l.ExpiresAt.UTC()
		lease = l
		return nil
	})
	return lease, retry, err
}

// endSQL ends leases and frees the pairs they still hold (not yet
// researched), giving their active clips back to their episodes.
const endSQL = `, deleted AS (
	DELETE FROM research.pairs p USING ended WHERE p.lease_id = ended.id AND p.state = 'leased' AND p.failures = 0
	RETURNING p.episode_id, p.clip_id
), due AS (
	-- A pair that failed before keeps its count: it is due again.
	UPDATE research.pairs p SET state = 'waiting', retry_at = NULL, lease_id = NULL FROM ended
	WHERE p.lease_id = ended.id AND p.state = 'leased' AND p.failures > 0
	RETURNING p.episode_id, p.clip_id
), freed AS (
	SELECT * FROM deleted UNION ALL SELECT * FROM due
), cnt AS (
	SELECT f.episode_id, count(*) AS n FROM freed f JOIN research.clips c ON c.id = f.clip_id AND c.active GROUP BY f.episode_id
), upd AS (
	UPDATE research.episodes e SET open_clips = e.open_clips + cnt.n FROM cnt WHERE e.id = cnt.episode_id AND e.active
)
SELECT ended.id::text, (SELECT count(*) FROM freed) FROM ended`

// ExpireLeases ends every active lease past its expiry and frees its
// unfinished clips. A lease that a researcher took (Hold) and that expires
// is a failed attempt of its episode (its researcher crashed, hung or lost
// the item): the episode backs off, and after RESEARCH_MAX_ATTEMPTS such
// failures it is parked; one whose item nobody took in time is not. It
// returns the expired leases' ids.
func (s *Store) ExpireLeases(ctx context.Context) ([]string, error) {
	ids, err := s.expireLeases(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		cause := fmt.Errorf("lease %s expired before all its results were stored: its researcher crashed, hung or lost the item", id)
		if err := s.leaseFailed(ctx, id, s.cfg.crashPolicy(), cause, false); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

func (s *Store) expireLeases(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `WITH ended AS (
	UPDATE research.leases SET state = 'expired', ended_at = clock_timestamp()
	WHERE state = 'active' AND expires_at < now() RETURNING id
)`+endSQL)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id string
		var n int64
		err := r.Scan(&id, &n)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	return ids, nil
}

// Revoke ends an active lease and frees its unfinished clips. It reports
// whether the lease was active.
func (s *Store) Revoke(ctx context.Context, leaseID string) (bool, error) {
	rows, err := s.db.Query(ctx, `WITH ended AS (
	UPDATE research.leases SET state = 'revoked', ended_at = clock_timestamp()
	WHERE id = $1 AND state = 'active' RETURNING id
)`+endSQL, leaseID)
	if err != nil {
		return false, fmt.Errorf("revoke lease %s: %w", leaseID, err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("revoke lease %s: %w", leaseID, err)
	}
	return n > 0, nil
}

// Extend pushes an active, unexpired lease's expiry to at least now+by. It
// reports whether it did: a revoked or expired lease is not extended.
func (s *Store) Extend(ctx context.Context, leaseID string, by time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE research.leases SET expires_at = greatest(expires_at, now() + $2::interval)
		WHERE id = $1 AND state = 'active' AND expires_at > now()`, leaseID, by)
	if err != nil {
		return false, fmt.Errorf("extend lease %s: %w", leaseID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Hold extends, as Extend does, a lease a live researcher says it is
// working on, and marks it taken: a taken lease that expires is a failure
// of its episode (its researcher crashed, hung or lost the item), one
// whose item no researcher took is not (there was no one free in time).
func (s *Store) Hold(ctx context.Context, leaseID string, by time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE research.leases SET expires_at = greatest(expires_at, now() + $2::interval),
		held_at = coalesce(held_at, now())
		WHERE id::text = $1 AND state = 'active' AND expires_at > now()`, leaseID, by)
	if err != nil {
		return false, fmt.Errorf("hold lease %s: %w", leaseID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// leaseFailed records a failed attempt of lease's episode under policy p,
// unless the lease was made before the episode's media last changed (a
// stale failure never counts against new media).
func (s *Store) leaseFailed(ctx context.Context, leaseID string, p fault.Policy, cause error, missing bool) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var epID int64
		var stale bool
		var taken bool
		err := tx.QueryRow(ctx, `SELECT e.id, l.created_at < e.media_changed_at, l.held_at IS NOT NULL
			FROM research.leases l JOIN research.episodes e ON e.id = l.episode_id
			WHERE l.id = $1 FOR UPDATE OF e`, leaseID).Scan(&epID, &stale, &taken)
		if errors.Is(err, pgx.ErrNoRows) || stale || !taken {
			return nil // stale, or its item was never taken: no one failed
		}
		if err != nil {
			return fmt.Errorf("failure of lease %s: %w", leaseID, err)
		}
		_, err = episodeFailed(ctx, tx, epID, p, cause, missing)
		return err
	})
}

// episodeFailed records a failure of episode id (locked by the caller's
// transaction) under policy p: it backs off (next_attempt_at), or is parked
// with the reason. It reports whether it parked.
func episodeFailed(ctx context.Context, tx pgx.Tx, id int64, p fault.Policy, cause error, missing bool) (bool, error) {
	d, err := episodeFailures.Fail(ctx, tx, id, p, cause)
	if err != nil || !d.Park {
		return d.Park, err
	}
	if _, err := tx.Exec(ctx, `UPDATE research.episodes SET parked_missing = $2 WHERE id = $1`, id, missing); err != nil {
		return false, fmt.Errorf("failure of episode %d: %w", id, err)
	}
	return true, nil
}

// episodeFailures are the episodes' failure-model columns.
var episodeFailures = work.Failures{Table: "research.episodes", Key: "id",
	Count: "failures", FirstFailedAt: "first_failed_at", NextAt: "next_attempt_at", Error: "last_error", ParkedAt: "parked_at",
	ParkedReason: "parked_reason", Text: events.FailureText}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// EpisodeFailure records a researcher's report that an episode's own audio
// could not be researched under lease leaseID. A failure that may pass
// (kind FailureMediaMissing or FailureTransient) backs the episode off and
// parks it only after RESEARCH_MEDIA_WAIT; a permanent one (kind "") parks
// it at once. A report from a lease made before the episode's media last
// changed is stale and changes nothing. known is false for an unknown
// episode.
func (s *Store) EpisodeFailure(ctx context.Context, leaseID, key, reason, kind string) (known, parked bool, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var id int64
		var stale bool
		err := tx.QueryRow(ctx, `SELECT e.id, coalesce((SELECT l.created_at < e.media_changed_at FROM research.leases l WHERE l.id::text = $2), false)
			FROM research.episodes e WHERE e.key = $1 FOR UPDATE`, key, leaseID).Scan(&id, &stale)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		known = true
		if stale {
			return nil
		}
		p, cause := s.cfg.waitPolicy(), errors.New(reason)
		if kind == "" {
			cause = fault.Permanent(cause)
		}
		parked, err = episodeFailed(ctx, tx, id, p, cause, kind == events.FailureMediaMissing)
		return err
	})
	if err != nil {
		return false, false, fmt.Errorf("episode failure of %s: %w", key, err)
	}
	return known, parked, nil
}

// EpisodeSucceeded forgets the failures of lease's episode once a lease of
// it ended with every result stored (its final result).
func (s *Store) EpisodeSucceeded(ctx context.Context, leaseID string) error {
	_, err := s.db.Exec(ctx, `UPDATE research.episodes SET failures = 0, first_failed_at = NULL, next_attempt_at = '-infinity', last_error = ''
		WHERE id = (SELECT episode_id FROM research.leases WHERE id::text = $1) AND failures > 0`, leaseID)
	if err != nil {
		return fmt.Errorf("episode of lease %s succeeded: %w", leaseID, err)
	}
	return nil
}

// ReleaseDue opens again the pairs whose wait after a failure is over, so
// that they are leased again. It returns how many it opened.
func (s *Store) ReleaseDue(ctx context.Context) (int, error) {
	return s.reopen(ctx, `UPDATE research.pairs SET retry_at = NULL WHERE state = 'waiting' AND retry_at <= now() RETURNING episode_id`)
}

// MediaArrived is told that an object was stored under key: pairs waiting
// for a clip with that media, or parked because it was missing, are opened
// again; an episode with that media waiting or parked for it is due at
// once. It returns how many pairs and episodes it released.
func (s *Store) MediaArrived(ctx context.Context, key string) (int, error) {
	pairs, err := s.reopen(ctx, `WITH c AS (SELECT id FROM research.clips WHERE media_key = $1),
		w AS (UPDATE research.pairs p SET retry_at = NULL FROM c WHERE p.clip_id = c.id AND p.state = 'waiting' AND p.retry_at IS NOT NULL
			RETURNING p.episode_id),
		r AS (DELETE FROM research.results r USING research.pairs p, c WHERE p.clip_id = c.id AND p.state = 'failed' AND p.missing
			AND r.episode_id = p.episode_id AND r.clip_id = p.clip_id RETURNING r.episode_id, r.clip_id),
		f AS (DELETE FROM research.pairs p USING r WHERE p.episode_id = r.episode_id AND p.clip_id = r.clip_id RETURNING p.episode_id)
		SELECT episode_id FROM w UNION ALL SELECT episode_id FROM f`, key)
	if err != nil {
		return 0, err
	}
	tag, err := s.db.Exec(ctx, `UPDATE research.episodes SET next_attempt_at = '-infinity',
		parked_reason = CASE WHEN parked_missing THEN NULL ELSE parked_reason END,
		parked_at = CASE WHEN parked_missing THEN NULL ELSE parked_at END,
		failures = CASE WHEN parked_missing THEN 0 ELSE failures END, parked_missing = false
		WHERE media_key = $1 AND (next_attempt_at > now() OR parked_missing)`, key)
	if err != nil {
		return pairs, fmt.Errorf("media %s arrived: %w", key, err)
	}
	return pairs + int(tag.RowsAffected()), nil
}

// reopen runs a statement that opens pairs again and returns their
// episodes' ids, then recounts those episodes. It returns how many pairs.
func (s *Store) reopen(ctx context.Context, sql string, args ...any) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		n = len(ids)
		_, err = tx.Exec(ctx, recountSQL+` WHERE e.id = ANY($1)`, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("open pairs again: %w", err)
	}
	return n, nil
}

// Redo has an episode researched again, as an operator asks: with
// failedOnly its failed clips (their audio fixed, say), else all its clips
// (the locator improved, say). Their results and pairs are forgotten, the
// episode is unparked and recounted, so the pwa leases the clips again. It
// returns how many results it forgot; false if the episode is unknown.
func (s *Store) Redo(ctx context.Context, key string, failedOnly bool) (int, bool, error) {
	var forgot int
	var known bool
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		forgot, known, err = redo(ctx, tx, key, failedOnly)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("redo episode %s: %w", key, err)
	}
	return forgot, known, nil
}

// The statements that park and release an episode ($1 its key).
const (
	parkSQL    = `UPDATE research.episodes SET parked_reason = $2, parked_at = now() WHERE key = $1`
	releaseSQL = `UPDATE research.episodes SET parked_reason = NULL, parked_at = NULL, parked_missing = false,
		failures = 0, first_failed_at = NULL, next_attempt_at = '-infinity' WHERE key = $1 AND parked_reason IS NOT NULL`
)

// redo is Redo in tx.
func redo(ctx context.Context, tx pgx.Tx, key string, failedOnly bool) (forgot int, known bool, err error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+worksLock+`)`); err != nil {
		return 0, false, fmt.Errorf("lock works changes: %w", err)
	}
	var id int64
	err = tx.QueryRow(ctx, `UPDATE research.episodes SET parked_reason = NULL, parked_at = NULL, parked_missing = false,
		failures = 0, first_failed_at = NULL, next_attempt_at = '-infinity' WHERE key = $1 RETURNING id`, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := tx.QueryRow(ctx, `WITH d AS (DELETE FROM research.results WHERE episode_id = $1 AND ($2 = false OR failure IS NOT NULL) RETURNING clip_id),
		p AS (DELETE FROM research.pairs WHERE episode_id = $1 AND state <> 'leased' AND (clip_id IN (SELECT clip_id FROM d) OR state = 'waiting'))
		SELECT count(*) FROM d`, id, failedOnly).Scan(&forgot); err != nil {
		return 0, true, err
	}
	return forgot, true, recountEpisode(ctx, tx, id)
}

// ErrUnknownPair is returned for a result whose episode or clip is unknown.
var ErrUnknownPair = errors.New("unknown episode or clip")

// ErrStaleResult is returned for a result of a lease made before its
// episode's or clip's media last changed: computed from other audio, it is
// not stored (the work is researched again from its new media).
var ErrStaleResult = errors.New("stale result: the media changed after its lease was made")

// StoreResult stores a clip's result for an episode, idempotently: the first
// result of a pair is kept and marks it researched (or failed, parking the
// pair with the result's failure reason); a redelivered or duplicated one
// changes nothing. It reports whether this call stored it.
func (s *Store) StoreResult(ctx context.Context, r *events.ResearchCompleted) (bool, error) {
	occ := r.Occurrences
	if occ == nil {
		occ = []events.Occurrence{}
	}
	occJSON, err := json.Marshal(occ)
	if err != nil {
		return false, err
	}
	leaseID, err := uuid.Parse(r.LeaseID)
	if err != nil {
		return false, fmt.Errorf("lease id %q: %w", r.LeaseID, err)
	}
	if r.Failure != "" && r.FailureKind != "" {
		// A failure that may pass: the pair waits and is leased again,
		// until its budget is spent; then it is stored as failed below.
		waits, err := s.pairWaits(ctx, r, leaseID)
		if err != nil || waits {
			return false, err
		}
	}
	state := "researched"
	if r.Failure != "" {
		state = "failed"
	}
	var known, stored int
	var stale bool
	// A result of a lease made before the episode's or the clip's media
	// last changed was computed from other audio: it is refused.
	err = s.db.QueryRow(ctx, `WITH named AS (
	SELECT e.id AS eid, c.id AS cid, c.active AS cactive,
		coalesce((SELECT l.created_at < greatest(e.media_changed_at, c.media_changed_at) FROM research.leases l WHERE l.id = $3), false) AS stale
	FROM research.episodes e, research.clips c WHERE e.key = $1 AND c.key = $2
), ids AS (
	SELECT * FROM named WHERE NOT stale
), res AS (
	INSERT INTO research.results (episode_id, clip_id, lease_id, researcher, occurrences, failure, miss)
	SELECT eid, cid, $3, $4, $5, NULLIF($6, ''), $8 FROM ids ON CONFLICT DO NOTHING RETURNING 1
), pair AS (
	-- xmax = 0: the row was inserted (the pair was open), not updated from
	-- 'leased'; decided at write time, after any concurrent change of the row.
	INSERT INTO research.pairs (episode_id, clip_id, state) SELECT eid, cid, $7::text FROM ids
	ON CONFLICT (episode_id, clip_id) DO UPDATE SET state = $7, lease_id = NULL
	WHERE research.pairs.state = 'leased'
	RETURNING (xmax = 0) AS inserted
), upd AS (
	UPDATE research.episodes e SET researched_clips = e.researched_clips + CASE WHEN $7 = 'researched' THEN 1 ELSE 0 END,
		open_clips = greatest(e.open_clips - CASE WHEN (SELECT inserted FROM pair) THEN 1 ELSE 0 END, 0)
	FROM ids WHERE e.id = ids.eid AND ids.cactive AND EXISTS (SELECT 1 FROM pair)
)
SELECT (SELECT count(*) FROM named), (SELECT count(*) FROM res), coalesce((SELECT stale FROM named), false)`,
		r.Episode, r.Clip, leaseID, r.Researcher, occJSON, r.Failure, state, r.Miss).Scan(&known, &stored, &stale)
	if err != nil {
		return false, fmt.Errorf("store result %s/%s: %w", r.Episode, r.Clip, err)
	}
	if known == 0 {
		return false, fmt.Errorf("result for %s/%s: %w", r.Episode, r.Clip, ErrUnknownPair)
	}
	if stale {
		return false, fmt.Errorf("result for %s/%s of lease %s: %w", r.Episode, r.Clip, r.LeaseID, ErrStaleResult)
	}
	if stored == 1 && r.FailureKind == events.FailureMediaMissing {
		// Parked for media that never arrived: released if it does.
		if _, err := s.db.Exec(ctx, `UPDATE research.pairs p SET missing = true FROM research.episodes e, research.clips c
			WHERE e.key = $1 AND c.key = $2 AND p.episode_id = e.id AND p.clip_id = c.id`, r.Episode, r.Clip); err != nil {
			return true, fmt.Errorf("result for %s/%s: %w", r.Episode, r.Clip, err)
		}
	}
	return stored == 1, nil
}

// pairWaits records a failure of a pair that may pass (its clip's media
// not in the store yet, say): the pair waits (state waiting, retry_at)
// and keeps its failures; it reports false when the pair's budget is spent
// (the caller stores the failure, parking the pair). A pair that already
// has a result, or already waits, is left alone (a redelivery).
func (s *Store) pairWaits(ctx context.Context, r *events.ResearchCompleted, leaseID uuid.UUID) (bool, error) {
	waits := false
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var eid, cid int64
		var cactive, stale bool
		var state *string
		var failures *int
		var first *time.Time
		var now time.Time
		err := tx.QueryRow(ctx, `SELECT e.id, c.id, c.active,
			coalesce((SELECT l.created_at < greatest(e.media_changed_at, c.media_changed_at) FROM research.leases l WHERE l.id = $3), false),
			p.state, p.failures, p.first_failed_at, now()
			FROM research.episodes e JOIN research.clips c ON c.key = $2
			LEFT JOIN research.pairs p ON p.episode_id = e.id AND p.clip_id = c.id
			WHERE e.key = $1 FOR UPDATE OF e`, r.Episode, r.Clip, leaseID).Scan(&eid, &cid, &cactive, &stale, &state, &failures, &first, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("result for %s/%s: %w", r.Episode, r.Clip, ErrUnknownPair)
		}
		if err != nil {
			return err
		}
		if stale {
			return fmt.Errorf("result for %s/%s of lease %s: %w", r.Episode, r.Clip, r.LeaseID, ErrStaleResult)
		}
		if state != nil && *state != "leased" {
			waits = true // answered already, or waiting: a redelivery
			return nil
		}
		n := 1
		if failures != nil {
			n = *failures + 1
		}
		d := s.cfg.waitPolicy().Decide(errors.New(r.Failure), n, deref(first), now)
		if d.Park {
			return nil
		}
		waits = true
		if _, err := tx.Exec(ctx, `INSERT INTO research.pairs AS p (episode_id, clip_id, state, failures, first_failed_at, retry_at, last_error, missing)
			VALUES ($1, $2, 'waiting', 1, now(), $3, $4, $5)
			ON CONFLICT (episode_id, clip_id) DO UPDATE SET state = 'waiting', lease_id = NULL, failures = p.failures + 1,
				first_failed_at = coalesce(p.first_failed_at, now()), retry_at = $3, last_error = $4, missing = $5`,
			eid, cid, d.RetryAt, events.FailureText(d.Reason), r.FailureKind == events.FailureMediaMissing); err != nil {
			return err
		}
		if state == nil && cactive { // it was open: it is not any more
			if _, err := tx.Exec(ctx, `UPDATE research.episodes SET open_clips = greatest(open_clips - 1, 0) WHERE id = $1 AND active`, eid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrUnknownPair) || errors.Is(err, ErrStaleResult) {
			return false, err
		}
		return false, fmt.Errorf("result for %s/%s: %w", r.Episode, r.Clip, err)
	}
	return waits, nil
}

// StoredOfLease counts the lease's clips that have a stored result (from
// any lease).
func (s *Store) StoredOfLease(ctx context.Context, leaseID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM research.leases l JOIN research.results r
		ON r.episode_id = l.episode_id AND r.clip_id = ANY (l.clip_ids) WHERE l.id = $1`, leaseID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("results of lease %s: %w", leaseID, err)
	}
	return n, nil
}

// RetireUnusedPrints retires, a page of at most limit at a time, the
// prints of audio no lease has named for retention: publish is called for
// each (the pwa publishes research.media.retired, reason "unused", which
// a researcher takes to discard them) and the audio marked retired in the
// same transaction. A publish that fails leaves the rest of the page for
// the next call; one published whose mark did not commit is published
// again (discarding twice is harmless). It returns how many it retired.
// Several pwa replicas share the work (their pages skip each other's
// rows).
func (s *Store) RetireUnusedPrints(ctx context.Context, retention time.Duration, limit int, publish func(context.Context, *events.MediaRetired) error) (int, error) {
	done := 0
	var perr error // a publish that failed: what went before it is committed
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT sha256, work FROM research.media_use
			WHERE retired_at IS NULL AND used_at < now() - $1::interval
			ORDER BY used_at LIMIT $2 FOR UPDATE SKIP LOCKED`, retention, limit)
		if err != nil {
			return fmt.Errorf("unused audio: %w", err)
		}
		page, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ SHA256, Work string }])
		if err != nil {
			return fmt.Errorf("unused audio: %w", err)
		}
		var retired []string
		for _, d := range page {
			if perr = publish(ctx, &events.MediaRetired{SHA256: d.SHA256, Work: d.Work, Reason: events.RetiredUnused}); perr != nil {
				break
			}
			retired = append(retired, d.SHA256)
		}
		if len(retired) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE research.media_use SET retired_at = now() WHERE sha256 = ANY ($1)`, retired); err != nil {
			return fmt.Errorf("mark retired: %w", err)
		}
		done = len(retired)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if perr != nil {
		return done, fmt.Errorf("publish the retirement of unused audio: %w", perr)
	}
	return done, nil
}
