package research

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/pkg/work"
)

// ErrNoEpisode is History's answer for a key the pwa does not know.
var ErrNoEpisode = errors.New("no such episode")

// History is an episode's research as an operator follows it: its state,
// counts, and its leases and results (and parking) in time order.
func (s *Store) History(ctx context.Context, key string) (service.History, error) {
	h := service.History{Kind: "episode", ID: key, Facts: []service.Fact{}, Events: []service.HistoryEvent{}}
	var id int64
	var active bool
	var title, media, trace string
	var researched, open int
	var parked *string
	var parkedAt *time.Time
	var mediaChanged pgtype.Timestamptz
	err := pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT id, active, title, media_key, researched_clips, open_clips, parked_reason, parked_at, media_changed_at, traceparent
			FROM research.episodes WHERE key = $1`, key).Scan(&id, &active, &title, &media, &researched, &open, &parked, &parkedAt, &mediaChanged, &trace)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoEpisode
		} else if err != nil {
			return err
		}
		var clips, leased, failed int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM research.clips WHERE active),
			(SELECT count(*) FROM research.leases WHERE episode_id = $1 AND state = 'active'),
			(SELECT count(*) FROM research.pairs WHERE episode_id = $1 AND state = 'failed')`, id).Scan(&clips, &leased, &failed); err != nil {
			return err
		}
		switch {
		case !active:
			h.State = "inactive"
		case parked != nil && leased == 0:
			h.State = "parked"
		case clips > 0 && researched >= clips:
			h.State = "complete"
		case leased > 0:
			h.State = "in progress"
		case open == 0 && failed > 0:
			h.State = "done with failed clips"
		default:
			h.State = "waiting"
		}
		h.Facts = append(h.Facts, service.Fact{Name: "title", Value: title}, service.Fact{Name: "media", Value: media},
			service.Fact{Name: "clips researched", Value: fmt.Sprintf("%d of %d", researched, clips)},
			service.Fact{Name: "clips failed", Value: strconv.Itoa(failed)})
		if parked != nil {
			h.Facts = append(h.Facts, service.Fact{Name: "parked", Value: *parked})
			h.Events = append(h.Events, service.HistoryEvent{At: *parkedAt, What: "parked", Detail: *parked})
		}
		if mediaChanged.Valid && mediaChanged.InfinityModifier == pgtype.Finite {
			h.Events = append(h.Events, service.HistoryEvent{At: mediaChanged.Time, What: "media changed", Detail: "researched again from the new audio"})
		}
		rows, err := tx.Query(ctx, `(SELECT created_at, 'leased', id::text || ', ' || cardinality(clip_ids) || ' clip(s), until ' || to_char(expires_at AT TIME ZONE 'UTC', 'HH24:MI:SS')
				FROM research.leases WHERE episode_id = $1 ORDER BY created_at DESC LIMIT $2)
			UNION ALL
			(SELECT ended_at, 'lease ' || state, id::text FROM research.leases WHERE episode_id = $1 AND ended_at IS NOT NULL ORDER BY ended_at DESC LIMIT $2)
			UNION ALL
			(SELECT r.stored_at, CASE WHEN r.failure IS NULL THEN 'result' ELSE 'clip failed' END,
				c.key || CASE WHEN r.failure IS NULL THEN ': ' || jsonb_array_length(r.occurrences) || ' occurrence(s), by ' || r.researcher
					|| coalesce('; the best candidate, at ' || round((r.miss->'candidates'->0->>'offset_ms')::numeric / 1000, 2) || ' s: '
						|| (r.miss->'candidates'->0->>'votes') || ' of ' || (r.miss->'candidates'->0->>'hashes') || ' landmarks ('
						|| (r.miss->'candidates'->0->>'needed') || ' needed), refused at the ' || (r.miss->'candidates'->0->>'stage') || ' stage', '')
					ELSE ': ' || r.failure END
				FROM research.results r JOIN research.clips c ON c.id = r.clip_id WHERE r.episode_id = $1 ORDER BY r.stored_at DESC LIMIT $2)`, id, service.MaxHistoryEvents)
		if err != nil {
			return err
		}
		if err := service.ScanEvents(&h, rows); err != nil {
			return err
		}
		// The operators' actions on it (pkg/work).
		acts, err := work.History(ctx, tx, "research", "research/episode/"+key)
		h.Events = append(h.Events, acts...)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNoEpisode) {
			return h, err
		}
		return h, fmt.Errorf("episode %s history: %w", key, err)
	}
	h.TraceID = telemetry.TraceIDOf(trace)
	service.SortHistory(&h)
	return h, nil
}
