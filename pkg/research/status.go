package research

import (
	"context"
	"fmt"
	"time"
)

// Status is the research state an operator looks at.
type Status struct {
	// Episodes counts active episodes: complete (every active clip
	// researched), in progress (an active lease), parked, done with failed
	// clips (nothing left to lease, some clips failed), waiting (the rest).
	Episodes struct {
		Complete        int64 `json:"complete"`
		InProgress      int64 `json:"in_progress"`
		Waiting         int64 `json:"waiting"`
		Parked          int64 `json:"parked"`
		WithFailedClips int64 `json:"with_failed_clips"`
	} `json:"episodes"`
	// Parked are the parked episodes with their reasons, most recent first
	// (at most 100), and FailedClips the clips parked in an episode.
	Parked      []ParkedInfo `json:"parked"`
	FailedClips []ParkedInfo `json:"failed_clips"`
	// Retrying are the episodes and the clips in an episode that failed
	// for a cause that may pass (media not in the store yet, a lease that
	// expired) and wait for their next attempt, soonest first (at most 100).
	Retrying []RetryInfo `json:"retrying"`
	// Clips is the number of active clips.
	Clips int64 `json:"clips"`
	// Results is the number of stored results.
	Results int64 `json:"results"`
	// LeasesActive is the number of active leases.
	LeasesActive int64 `json:"leases_active"`
	// Leases are the active leases, soonest expiry first (at most 100).
	Leases []LeaseInfo `json:"leases"`
	// QueueDepth is the number of work items waiting in the queue.
	QueueDepth int64 `json:"queue_depth"`
	// Researchers is the number of live researchers.
	Researchers int `json:"researchers"`
}

// ParkedInfo is a parked episode, or a clip parked in an episode.
type ParkedInfo struct {
	Episode string    `json:"episode"`
	Clip    string    `json:"clip,omitempty"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// RetryInfo is an episode (Clip "") or a clip in an episode waiting for
// its next attempt after a failure.
type RetryInfo struct {
	Episode  string    `json:"episode"`
	Clip     string    `json:"clip,omitempty"`
	Failures int       `json:"failures"`
	Reason   string    `json:"reason"`
	NextAt   time.Time `json:"next_attempt_at"`
}

// LeaseInfo describes an active lease.
type LeaseInfo struct {
	ID        string    `json:"id"`
	Episode   string    `json:"episode"`
	Clips     int       `json:"clips"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Status reads the database part of the status (queue depth and
// researchers come from NATS).
func (s *Store) Status(ctx context.Context) (Status, error) {
	st, err := s.Counts(ctx)
	if err != nil {
		return Status{}, err
	}
	return s.lists(ctx, st)
}

// Counts reads the status's counts of episodes, clips and results, without
// its lists: one query, cheap enough for a metric read at every scrape.
func (s *Store) Counts(ctx context.Context) (Status, error) {
	var st Status
	err := s.db.QueryRow(ctx, `WITH clips AS (SELECT count(*) AS n FROM research.clips WHERE active),
leased AS (SELECT DISTINCT episode_id FROM research.leases WHERE state = 'active'),
failed AS (SELECT DISTINCT p.episode_id FROM research.pairs p JOIN research.clips c ON c.id = p.clip_id AND c.active WHERE p.state = 'failed'),
rest AS (SELECT e.id, e.open_clips FROM research.episodes e, clips
	WHERE e.active AND NOT (e.researched_clips >= clips.n AND clips.n > 0) AND e.parked_reason IS NULL
		AND e.id NOT IN (SELECT episode_id FROM leased))
SELECT
	count(*) FILTER (WHERE e.researched_clips >= clips.n AND clips.n > 0),
	count(*) FILTER (WHERE NOT (e.researched_clips >= clips.n AND clips.n > 0) AND e.id IN (SELECT episode_id FROM leased)),
	(SELECT count(*) FROM rest WHERE open_clips > 0 OR id NOT IN (SELECT episode_id FROM failed)),
	count(*) FILTER (WHERE e.parked_reason IS NOT NULL AND e.id NOT IN (SELECT episode_id FROM leased)),
	(SELECT count(*) FROM rest WHERE open_clips = 0 AND id IN (SELECT episode_id FROM failed)),
	(SELECT n FROM clips), (SELECT count(*) FROM research.results), (SELECT count(*) FROM research.leases WHERE state = 'active')
FROM research.episodes e, clips WHERE e.active`).Scan(&st.Episodes.Complete, &st.Episodes.InProgress, &st.Episodes.Waiting, &st.Episodes.Parked,
		&st.Episodes.WithFailedClips, &st.Clips, &st.Results, &st.LeasesActive)
	if err != nil {
		return Status{}, fmt.Errorf("research status: %w", err)
	}
	return st, nil
}

// lists adds the status's lists (leases, parked episodes, failed clips).
func (s *Store) lists(ctx context.Context, st Status) (Status, error) {
	rows, err := s.db.Query(ctx, `SELECT l.id::text, e.key, cardinality(l.clip_ids), l.expires_at
		FROM research.leases l JOIN research.episodes e ON e.id = l.episode_id
		WHERE l.state = 'active' ORDER BY l.expires_at LIMIT 100`)
	if err != nil {
		return Status{}, fmt.Errorf("research status: %w", err)
	}
	defer rows.Close()
	if st.Parked, err = s.parked(ctx, `SELECT key, '', parked_reason, parked_at FROM research.episodes
		WHERE parked_reason IS NOT NULL ORDER BY parked_at DESC LIMIT 100`); err != nil {
		return Status{}, err
	}
	if st.FailedClips, err = s.parked(ctx, `SELECT e.key, c.key, r.failure, r.stored_at FROM research.results r
		JOIN research.episodes e ON e.id = r.episode_id JOIN research.clips c ON c.id = r.clip_id
		WHERE r.failure IS NOT NULL ORDER BY r.stored_at DESC LIMIT 100`); err != nil {
		return Status{}, err
	}
	if st.Retrying, err = s.retrying(ctx); err != nil {
		return Status{}, err
	}
	st.Leases = []LeaseInfo{}
	for rows.Next() {
		var l LeaseInfo
		if err := rows.Scan(&l.ID, &l.Episode, &l.Clips, &l.ExpiresAt); err != nil {
			return Status{}, err
		}
		l.ExpiresAt = l.ExpiresAt.UTC()
		st.Leases = append(st.Leases, l)
	}
	return st, rows.Err()
}

func (s *Store) retrying(ctx context.Context) ([]RetryInfo, error) {
	rows, err := s.db.Query(ctx, `(SELECT key, '', failures, last_error, next_attempt_at FROM research.episodes
			WHERE failures > 0 AND next_attempt_at > now() AND active AND parked_reason IS NULL ORDER BY next_attempt_at LIMIT 100)
		UNION ALL
		(SELECT e.key, c.key, p.failures, p.last_error, p.retry_at FROM research.pairs p
			JOIN research.episodes e ON e.id = p.episode_id JOIN research.clips c ON c.id = p.clip_id
			WHERE p.state = 'waiting' AND p.retry_at IS NOT NULL ORDER BY p.retry_at LIMIT 100)
		ORDER BY 5 LIMIT 100`)
	if err != nil {
		return nil, fmt.Errorf("research status: %w", err)
	}
	defer rows.Close()
	out := []RetryInfo{}
	for rows.Next() {
		var r RetryInfo
		if err := rows.Scan(&r.Episode, &r.Clip, &r.Failures, &r.Reason, &r.NextAt); err != nil {
			return nil, fmt.Errorf("research status: %w", err)
		}
		r.NextAt = r.NextAt.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) parked(ctx context.Context, q string) ([]ParkedInfo, error) {
	rows, err := s.db.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("research status: %w", err)
	}
	defer rows.Close()
	out := []ParkedInfo{}
	for rows.Next() {
		var p ParkedInfo
		if err := rows.Scan(&p.Episode, &p.Clip, &p.Reason, &p.At); err != nil {
			return nil, fmt.Errorf("research status: %w", err)
		}
		p.At = p.At.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
