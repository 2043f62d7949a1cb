package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/telemetry"
)

// Store is the ingest tables.
type Store struct {
	// DB is the curator's database; the ingest steps' own statements run
	// on it too.
	DB *pgxpool.Pool
	// wake is told of every committed transition (to wake the next state's
	// daemon); use moved, which also wakes what the move implies.
	wake func(e Entity, to State)
	// paused is the queue switch as last read (or set here).
	paused atomic.Bool
}

// NewStore wraps the curator's database.
func NewStore(db *pgxpool.Pool) *Store { return &Store{DB: db, wake: func(Entity, State) {}} }

// moved wakes the daemon of the state reached, after the commit, and those
// of what the move implies: a batch in processing has new jobs pending; a
// job's end may have moved its batch to reporting.
func (s *Store) moved(e Entity, to State) {
	s.wake(e, to)
	s.Implied(e, to)
}

// Implied wakes the daemons of what a move implies besides its target
// state (the jobs of a batch gone to processing, the report of a batch
// whose job ended). A daemon's own move uses it alone: the worker carries
// the job on to the target state itself, or wakes its daemon if it cannot.
func (s *Store) Implied(e Entity, to State) {
	switch {
	case e == Batch && to == Processing:
		s.wake(Job, Pending)
	case e == Job && (to == Completed || to == Failed || to == Deleted):
		s.wake(Batch, Reporting)
	case e == Batch && to == Deleted:
		s.wake(Batch, Reporting)
	}
}

// Submit records a batch: light, it reads nothing of the payload.
func (s *Store) Submit(ctx context.Context, sub Submission) (id int64, created bool, err error) {
	if err := sub.Validate(); err != nil {
		return 0, false, err
	}
	var key *string
	if sub.IdempotencyKey != "" {
		key = &sub.IdempotencyKey
	}
	err = s.DB.QueryRow(ctx, `INSERT INTO curator.batches (submitter, profile, payload_url, type, title, creator, date, callback_url, idempotency_key, traceparent,
			primary_ark, submission_mode, ark_shoulders)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (submitter, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id`,
		sub.Submitter, sub.Profile, sub.PayloadURL, sub.Type, sub.Title, sub.Creator, sub.Date, sub.CallbackURL, key, telemetry.Traceparent(ctx),
		sub.Primary, sub.SubmissionMode, sub.ARKShoulders).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// A retry: the key's batch must be the same submission.
		var first Submission
		err = s.DB.QueryRow(ctx, `SELECT id, profile, payload_url, type, title, creator, date, callback_url, primary_ark, submission_mode
			FROM curator.batches WHERE submitter = $1 AND idempotency_key = $2`, sub.Submitter, sub.IdempotencyKey).
			Scan(&id, &first.Profile, &first.PayloadURL, &first.Type, &first.Title, &first.Creator, &first.Date, &first.CallbackURL,
				&first.Primary, &first.SubmissionMode)
		if err != nil {
			return 0, false, fmt.Errorf("submit batch: find the batch of Idempotency-Key %q: %w", sub.IdempotencyKey, err)
		}
		first.Submitter, first.IdempotencyKey, first.ARKShoulders = sub.Submitter, sub.IdempotencyKey, sub.ARKShoulders
		if first != sub {
			return 0, false, &ConflictError{fmt.Sprintf("Idempotency-Key %q named a different submission (batch %d)", sub.IdempotencyKey, id)}
		}
		return id, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("submit batch: %w", err)
	}
	s.moved(Batch, Pending)
	return id, true, nil
}

// ConflictError is a request that contradicts an earlier one.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// ErrMoved is returned when an entity is no longer in the state a
// transition starts from (another worker or an operator moved it).
var ErrMoved = errors.New("ingest: no longer in that state")

// NotFoundError is an unknown batch or job.
type NotFoundError struct {
	Entity Entity
	ID     int64
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %d not found", e.Entity, e.ID) }

// ErrNotFound is what every NotFoundError is (errors.Is).
var ErrNotFound = errors.New("not found")

// Is makes a NotFoundError match ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Table is the table of e's rows.
func Table(e Entity) string {
	if e == Batch {
		return "curator.batches"
	}
	return "curator.jobs"
}

// move makes one transition inside tx: the table must allow it, the row
// must still be in from, and the history records it. A job reaching an
// end (completed, failed, deleted) may end its batch's processing: the
// caller runs reportIfDone once the move has committed.
func (s *Store) move(ctx context.Context, tx pgx.Tx, e Entity, id int64, from, to State, by By, action, detail string) error {
	return s.moveRow(ctx, tx, e, id, from, to, by, action, detail, Columns{}, nil)
}

// endsJob tells whether a move takes a job to an end, after which its batch
// may be done processing.
func endsJob(e Entity, to State) bool {
	return e == Job && (to == Completed || to == Failed || to == Deleted)
}

// Columns are what a move writes into its row besides the state: each
// field that is set (not nil; Worked not zero) is written by the move's
// own statement, the others are left as they are.
type Columns struct {
	// Priority is a job's priority (estimating raises a very large job's).
	Priority *int
	// SpaceNeeded is a job's bytes, as estimated and then as downloaded.
	SpaceNeeded *int64
	// Files are a job's files (nil leaves them; a pointer to an empty
	// list empties them).
	Files *[]File
	// Version is the version of its object a job stores.
	Version *int
	// Report is a batch's report (JSON).
	Report []byte
	// Worked is added to the row's time worked.
	Worked time.Duration
}

// assignments appends the SET items of the columns c sets to u, their
// values to args, always in the same order (so that the statement's text,
// and its prepared plan, is the same each time for the same columns).
func (c Columns) assignments(u string, args []any) (string, []any) {
	add := func(col, cast string, v any) {
		args = append(args, v)
		u += fmt.Sprintf(", %s = $%d%s", col, len(args), cast)
	}
	if c.Priority != nil {
		add("priority", "", *c.Priority)
	}
	if c.SpaceNeeded != nil {
		add("space_needed", "", *c.SpaceNeeded)
	}
	if c.Files != nil {
		add("files", "", *c.Files)
	}
	if c.Version != nil {
		add("version", "", *c.Version)
	}
	if c.Report != nil {
		add("report", "", c.Report)
	}
	if c.Worked != 0 {
		args = append(args, c.Worked)
		u += fmt.Sprintf(", worked = worked + $%d::interval", len(args))
	}
	return u, args
}

// moveRow is move on q (a transaction, or a connection when the move is
// all there is: one statement needs none), also writing the columns in
// set, and filling row with the job as the move left it when row is not
// nil.
func (s *Store) moveRow(ctx context.Context, q Querier, e Entity, id int64, from, to State, by By, action, detail string, set Columns, row *JobRow, fence ...int64) error {
	t, ok := AllowedBy(e, from, to, by)
	if !ok {
		return fmt.Errorf("ingest: %s %d: %s -> %s by %s is not in the transition table", e, id, from, to, by)
	}
	// A detail often quotes an origin server (a status line, an error):
	// PostgreSQL stores no NUL or invalid UTF-8, and a move that cannot be
	// stored would be tried again for ever.
	// Nor may it keep a URL's credentials: user info or a presigned
	// token in an error is for every reader of job lists and histories.
	detail = ScrubText(detail, 4000)
	u := `UPDATE ` + Table(e) + ` SET state = $3, state_at = now(), error = CASE WHEN $3 = 'failed' THEN $4 ELSE '' END,
		attempts = 0, next_attempt_at = '-infinity', last_attempt_error = '', first_failed_at = NULL`
	if e == Job && by == Daemon && to != Failed && to != Held {
		u += `, last_successful = $2`
	}
	u, args := set.assignments(u, []any{id, from, to, detail, e, by, t.Action})
	where := ` WHERE id = $1 AND state = $2`
	if len(fence) > 0 && fence[0] > 0 {
		// A claim's move: only while the claim holds (its epoch).
		args = append(args, fence[0])
		where += fmt.Sprintf(" AND claim_epoch = $%d", len(args))
	}
	// The move and its history row in one statement.
	hist := `INSERT INTO curator.ingest_history (entity, entity_id, from_state, to_state, by, action, detail)
		SELECT $5, id, $2, $3, $6, $7, $4 FROM m`
	if row != nil && e == Job {
		err := q.QueryRow(ctx, `WITH m AS (`+u+where+` RETURNING *), h AS (`+hist+`)
			SELECT `+jobColumns+` FROM m`, args...).Scan(row.fields()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrMoved
		}
		if err != nil {
			return fmt.Errorf("move %s %d to %s: %w", e, id, to, err)
		}
	} else {
		tag, err := q.Exec(ctx, `WITH m AS (`+u+where+` RETURNING id) `+hist, args...)
		if err != nil {
			return fmt.Errorf("move %s %d to %s: %w", e, id, to, err)
		}
		if tag.RowsAffected() == 0 {
			return ErrMoved
		}
	}
	return nil
}

// openJobStates are the states of a job that has not ended: a batch whose
// jobs are none of them is done processing.
var openJobStates = func() []string {
	var out []string
	for _, t := range Transitions {
		if t.Entity == Job && !endsJob(Job, t.From) && !slices.Contains(out, string(t.From)) {
			out = append(out, string(t.From))
		}
	}
	return out
}()

// reportIfDone moves a batch from processing to reporting if none of its
// jobs is open. It runs after a job's end has committed, not inside it: of
// jobs that end together, the one that commits last sees every other end
// (the move's state condition lets only one of them move the batch), so
// no lock has to serialise every job's end on the batch row. A crash
// between the commit and this check is made good by ReportDone.
func (s *Store) reportIfDone(ctx context.Context, q Querier, batch int64) (bool, error) {
	var open bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM curator.jobs WHERE batch_id = $1 AND state = ANY($2))`,
		batch, openJobStates).Scan(&open); err != nil {
		return false, fmt.Errorf("open jobs of batch %d: %w", batch, err)
	}
	if open {
		return false, nil
	}
	err := s.moveRow(ctx, q, Batch, batch, Processing, Reporting, Auto, "jobs-done", "", Columns{}, nil)
	if errors.Is(err, ErrMoved) {
		return false, nil // another job's end, or the sweep, moved it
	}
	if err != nil {
		return false, err
	}
	s.moved(Batch, Reporting)
	return true, nil
}

// ReportDone moves to reporting every batch in processing whose jobs have
// all ended: Ingester.Run runs it every INGEST_INTERVAL, for a batch
// whose last job's worker died between its end and reportIfDone.
func (s *Store) ReportDone(ctx context.Context) (int, error) {
	rows, err := s.DB.Query(ctx, `SELECT id FROM curator.batches b WHERE state = 'processing'
		AND NOT EXISTS (SELECT FROM curator.jobs WHERE batch_id = b.id AND state = ANY($1))`, openJobStates)
	if err != nil {
		return 0, fmt.Errorf("batches done processing: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("batches done processing: %w", err)
	}
	n := 0
	for _, id := range ids {
		moved, err := s.reportIfDone(ctx, s.DB, id)
		if err != nil {
			return n, err
		}
		if moved {
			n++
		}
	}
	return n, nil
}

// batchOf is a job's batch.
func (s *Store) batchOf(ctx context.Context, q Querier, job int64) (int64, error) {
	var batch int64
	if err := q.QueryRow(ctx, `SELECT batch_id FROM curator.jobs WHERE id = $1`, job).Scan(&batch); err != nil {
		return 0, fmt.Errorf("batch of job %d: %w", job, err)
	}
	return batch, nil
}

// Beginner is a pool or a connection: what a move begins its
// transaction on.
type Beginner interface {
	Begin(context.Context) (pgx.Tx, error)
	Querier
}

// MoveOnRow makes one transition on db, from to to, by by, with detail in
// the history: apply's writes in its transaction (a crash cannot half-do
// them), the columns in set written by the move's own statement, and row
// (if not nil) filled with the job as the move left it. It wakes no daemon but the
// reporting of a batch the move ended. A move with nothing to apply is one
// statement, sent without a transaction around it; a job's end then checks
// whether its batch is done.
func (s *Store) MoveOnRow(ctx context.Context, db Beginner, e Entity, id int64, from, to State, by By, detail string, set Columns, apply func(context.Context, pgx.Tx) error, row *JobRow, fence ...int64) error {
	var err error
	if apply == nil {
		err = s.moveRow(ctx, db, e, id, from, to, by, "", detail, set, row, fence...)
	} else {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if apply != nil {
				if err := apply(ctx, tx); err != nil {
					return err
				}
			}
			return s.moveRow(ctx, tx, e, id, from, to, by, "", detail, set, row, fence...)
		})
	}
	if err != nil || !endsJob(e, to) {
		return err
	}
	var batch int64
	if row != nil {
		batch = row.BatchID
	}
	return s.jobEnded(ctx, db, id, to, batch)
}

// jobEnded checks, once a job's end has committed, whether its batch
// (looked up when batch is 0) is done processing.
func (s *Store) jobEnded(ctx context.Context, q Querier, job int64, to State, batch int64) error {
	if batch == 0 {
		var err error
		if batch, err = s.batchOf(ctx, q, job); err != nil {
			return err
		}
	}
	if _, err := s.reportIfDone(ctx, q, batch); err != nil {
		// The move stands; the sweep will check the batch.
		return fmt.Errorf("job %d moved to %s, but its batch %d was not checked: %w", job, to, batch, err)
	}
	return nil
}

// Job reads a job.
func (s *Store) Job(ctx context.Context, id int64) (*JobRow, error) {
	return scanJob(s.DB.QueryRow(ctx, `SELECT `+jobColumns+` FROM curator.jobs WHERE id = $1`, id), id)
}

// OnMove has f told of every committed transition, after the commit (to
// wake the daemon of the state reached).
func (s *Store) OnMove(f func(e Entity, to State)) { s.wake = f }
