package research

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/work"
)

// WorkSources are research's episodes as the work kit's items (pkg/work):
// found by state (inactive, parked, retrying, open, done), age, key, media
// key or the words of their failure, their holder the lease that has them;
// released (a parked one), retried (its failed clips researched again,
// unparked) and parked by the operator's verbs. wake is called once an
// action committed (the pwa leases again).
func (s *Store) WorkSources(wake func()) []work.Source {
	src := &work.SQLSource{PipelineName: "research", KindName: "episode",
		Table: work.Table{
			From: "research.episodes e", Lock: "e", ID: "e.key", IDType: "text",
			State: "e.work_state", MovedAt: "e.state_at", CreatedAt: "nullif(e.initial_curated_at, 'epoch')",
			Attempts:      "e.failures",
			NextAttemptAt: "CASE WHEN e.next_attempt_at > now() THEN e.next_attempt_at END",
			Reason:        "coalesce(e.parked_reason, nullif(e.last_error, ''))",
			Holder:        "(SELECT 'lease ' || l.id::text FROM research.leases l WHERE l.episode_id = e.id AND l.state = 'active' LIMIT 1)",
			Keys:          []string{"e.media_key"},
			Text:          "coalesce(e.parked_reason, '') || ' ' || e.last_error",
			Open:          []string{"open", "retrying"}, Done: []string{"done"},
		},
		From: map[work.Verb][]string{
			work.Release: {"parked"},
			work.Retry:   {"parked", "retrying", "done"},
			work.Park:    {"open", "retrying"},
		},
		Only: map[work.Verb]string{
			// A done episode is retried only if some clip failed.
			work.Retry: `(e.work_state <> 'done' OR EXISTS (SELECT FROM research.pairs p WHERE p.episode_id = e.id AND p.state = 'failed'))`,
		},
	}
	src.Do = func(ctx context.Context, tx pgx.Tx, v work.Verb, keys []string, note work.Note) (func(context.Context), error) {
		for _, key := range keys {
			var err error
			switch v {
			case work.Release:
				_, err = tx.Exec(ctx, releaseSQL, key)
			case work.Retry:
				_, _, err = redo(ctx, tx, key, true)
			case work.Park:
				_, err = tx.Exec(ctx, parkSQL, key, "parked by an operator ("+note.String()+")")
			default:
				err = fmt.Errorf("an episode takes no %s", v)
			}
			if err != nil {
				return nil, fmt.Errorf("%s episode %s: %w", v, key, err)
			}
		}
		return func(context.Context) { wake() }, nil
	}
	return []work.Source{src}
}
