package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/store"
	"github.com/jackc/pgx/v5"
)

// Paused tells whether an operator paused the queue (and keeps the
// answer for PausedNow).
func (s *Store) Paused(ctx context.Context) (bool, error) {
	var p bool
	err := s.DB.QueryRow(ctx, `SELECT paused FROM curator.ingest_queue`).Scan(&p)
	if err == nil {
		s.paused.Store(p)
	}
	return p, err
}

// PausedNow is the queue switch as last read or set here, without asking
// the database.
func (s *Store) PausedNow() bool { return s.paused.Load() }

// SetPaused pauses or resumes the whole queue: daemons claim nothing new
// while it is paused; work in hand finishes.
func (s *Store) SetPaused(ctx context.Context, paused bool) error {
	_, err := s.DB.Exec(ctx, `UPDATE curator.ingest_queue SET paused = $1, paused_at = CASE WHEN $1 THEN now() END`, paused)
	if err == nil {
		s.paused.Store(paused)
	}
	if err == nil && !paused {
		for _, st := range JobSteps {
			s.moved(Job, st)
		}
		s.moved(Batch, Pending)
	}
	return err
}

// Held tells whether a collection is held.
func (s *Store) Held(ctx context.Context, profile string) (bool, error) {
	var h bool
	err := s.DB.QueryRow(ctx, `SELECT EXISTS (SELECT FROM curator.collection_holds WHERE profile = $1)`, profile).Scan(&h)
	return h, err
}

// HoldCollection holds a collection: its pending batches and jobs go to
// held when their daemon next looks at them.
func (s *Store) HoldCollection(ctx context.Context, profile string) error {
	_, err := s.DB.Exec(ctx, `INSERT INTO curator.collection_holds (profile) VALUES ($1) ON CONFLICT DO NOTHING`, profile)
	return err
}

// releasePage is how many held batches or jobs one transaction of
// ReleaseCollection moves: a collection of any size is released in pages,
// each holding few row locks and ids.
const releasePage = 500

// ReleaseCollection releases a collection's hold and every batch and job
// of it that the hold put in held, a page at a time; it stops early if the
// collection is held again meanwhile. It returns how many were released.
func (s *Store) ReleaseCollection(ctx context.Context, profile string) (int, error) {
	if _, err := s.DB.Exec(ctx, `DELETE FROM curator.collection_holds WHERE profile = $1`, profile); err != nil {
		return 0, err
	}
	total := 0
	for _, e := range []Entity{Batch, Job} {
		for {
			n := 0
			err := store.InTx(ctx, s.DB, func(tx pgx.Tx) error {
				n = 0
				var heldAgain bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM curator.collection_holds WHERE profile = $1)`, profile).Scan(&heldAgain); err != nil || heldAgain {
					return err
				}
				rows, err := tx.Query(ctx, `SELECT id FROM `+Table(e)+` WHERE profile = $1 AND state = 'held' ORDER BY id LIMIT $2 FOR UPDATE`, profile, releasePage)
				if err != nil {
					return err
				}
				ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					return err
				}
				for _, id := range ids {
					if err := s.move(ctx, tx, e, id, Held, Pending, Admin, "release", "collection "+profile+" released"); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return total, err
			}
			total += n
			if n > 0 {
				s.moved(e, Pending)
			}
			if n < releasePage {
				break
			}
		}
	}
	return total, nil
}

// Act runs an operator's action on a batch or job: release, hold, requeue,
// delete, update-reporting. An action the table does not allow from the
// current state is refused with a RefusedError.
func (s *Store) Act(ctx context.Context, e Entity, id int64, action string, confirmed bool) (State, error) {
	var to State
	err := store.InTx(ctx, s.DB, func(tx pgx.Tx) error {
		var err error
		to, err = s.ActIn(ctx, tx, e, id, action, confirmed, "")
		return err
	})
	if err != nil {
		return to, err
	}
	return to, s.Acted(ctx, e, id, to)
}

// Acted wakes what an action's move implies, once it committed; a job's end
// may end its batch's processing.
func (s *Store) Acted(ctx context.Context, e Entity, id int64, to State) error {
	s.moved(e, to)
	if endsJob(e, to) {
		return s.jobEnded(ctx, s.DB, id, to, 0)
	}
	return nil
}

// ActIn is Act in tx, without what follows the commit (Acted); detail goes
// into the item's history (the work kit's action, say).
func (s *Store) ActIn(ctx context.Context, tx pgx.Tx, e Entity, id int64, action string, confirmed bool, detail string) (State, error) {
	var to State
	err := func() error {
		var from, last State
		q := `SELECT state, '' FROM curator.batches WHERE id = $1 FOR UPDATE`
		if e == Job {
			q = `SELECT state, last_successful FROM curator.jobs WHERE id = $1 FOR UPDATE`
		}
		if err := tx.QueryRow(ctx, q, id).Scan(&from, &last); errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{e, id}
		} else if err != nil {
			return err
		}
		var t *Transition
		for _, m := range AdminMoves(e, action) {
			if m.From != from {
				continue
			}
			if action == "requeue" && m.To != next(last) {
				continue
			}
			t = &m
			break
		}
		if t == nil {
			return &RefusedError{Entity: e, ID: id, Action: action, State: from}
		}
		to = t.To
		if action == "requeue" {
			if _, err := tx.Exec(ctx, `UPDATE curator.jobs SET retry_count = retry_count + 1 WHERE id = $1`, id); err != nil {
				return err
			}
		}
		if action == "delete" && e == Job {
			// Deleting a job of a batch not yet reported means its outcome is
			// never reported: the operator confirms it (the spec's "confirm
			// that the user understands").
			var batch int64
			var bstate State
			if err := tx.QueryRow(ctx, `SELECT b.id, b.state FROM curator.batches b JOIN curator.jobs j ON j.batch_id = b.id WHERE j.id = $1`, id).Scan(&batch, &bstate); err != nil {
				return err
			}
			if !confirmed && slices.Contains([]State{Pending, Held, Processing, Reporting, UpdateReporting}, bstate) {
				return &ConflictError{fmt.Sprintf("job %d's batch %d is %s: deleting the job means no report will tell of it; confirm (?confirm=true, archivist job delete --yes)", id, batch, bstate)}
			}
			// What the spec deletes of a deleted job: its files' list; the
			// row stays as its history's anchor.
			if _, err := tx.Exec(ctx, `UPDATE curator.jobs SET files = '[]', space_needed = 0 WHERE id = $1`, id); err != nil {
				return err
			}
		}
		if action == "delete" && e == Batch {
			// A batch's jobs are deleted only from states the table lets
			// them be deleted from: a job a worker holds (a requeued one
			// downloading, say) is not pulled from under it.
			var busy []string
			rows, err := tx.Query(ctx, `SELECT id::text || ' is ' || state FROM curator.jobs
				WHERE batch_id = $1 AND state <> ALL($2) ORDER BY id LIMIT 5`, id, DeletableJobStates)
			if err != nil {
				return err
			}
			if busy, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			if len(busy) > 0 {
				return &ConflictError{fmt.Sprintf("batch %d has jobs at work (job %s): let them end, or hold them, before deleting the batch",
					id, strings.Join(busy, ", job "))}
			}
			if err := s.deleteJobs(ctx, tx, id); err != nil {
				return err
			}
		}
		return s.move(ctx, tx, e, id, from, to, Admin, "", detail)
	}()
	return to, err
}

// DeletableJobStates are the job states the table lets a job be deleted
// from (by an operator, or by cleanup), and deleted.
var DeletableJobStates = func() []State {
	out := []State{Deleted}
	for _, t := range Transitions {
		if t.Entity == Job && t.To == Deleted {
			out = append(out, t.From)
		}
	}
	return out
}()

// deleteJobs marks every job of a batch deleted (admin delete of the
// batch, or cleanup); the caller has checked they are deletable.
func (s *Store) deleteJobs(ctx context.Context, tx pgx.Tx, batch int64) error {
	_, err := tx.Exec(ctx, `WITH d AS (UPDATE curator.jobs SET state = 'deleted', state_at = now(), files = '[]', space_needed = 0 WHERE batch_id = $1 AND state <> 'deleted'
		RETURNING id, (SELECT state FROM curator.jobs j2 WHERE j2.id = jobs.id) AS old)
		INSERT INTO curator.ingest_history (entity, entity_id, from_state, to_state, by, action, detail)
		SELECT 'job', id, old, 'deleted', 'admin', 'delete', 'batch deleted' FROM d`, batch)
	return err
}

// next is the state a requeued job restarts at: the one after its last
// successful state.
func next(last State) State {
	for i, s := range JobSteps {
		if s == last && i+1 < len(JobSteps) {
			return JobSteps[i+1]
		}
	}
	return ""
}

// Cleanup deletes completed batches (and their jobs) finished before
// olderThan ago, up to 1,000 a call (the oldest first): the automatic
// cleanup past INGEST_RETENTION, and an operator's. It returns how many
// batches.
func (s *Store) Cleanup(ctx context.Context, olderThan time.Duration) (int, error) {
	rows, err := s.DB.Query(ctx, `SELECT id FROM curator.batches WHERE state = 'completed' AND state_at < now() - $1::interval
		ORDER BY state_at LIMIT 1000`, olderThan)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		err := store.InTx(ctx, s.DB, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `WITH d AS (UPDATE curator.jobs SET state = 'deleted', state_at = now()
				WHERE batch_id = $1 AND state = 'completed' RETURNING id)
				INSERT INTO curator.ingest_history (entity, entity_id, from_state, to_state, by, action, detail)
				SELECT 'job', id, 'completed', 'deleted', 'auto', 'cleanup', 'batch cleaned up' FROM d`, id); err != nil {
				return err
			}
			return s.move(ctx, tx, Batch, id, Completed, Deleted, Auto, "cleanup", "")
		})
		if err != nil && !errors.Is(err, ErrMoved) {
			return n, err
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}
