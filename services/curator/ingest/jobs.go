package ingest

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file is the jobs and batches as the other rooms of ingest read and
// write them: a typed function a statement, so that the tables
// (curator.batches, curator.jobs, curator.ingest_history) are written by
// this package alone (TestOnlyIngestTouchesItsTables holds it). The
// functions run on a Querier: the caller's transaction when the statement
// is one step of a larger one, else the pool.

// Querier is a transaction, a connection or a pool.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewJob is a job a batch's payload makes.
type NewJob struct {
	// Kind is file, container or manifest.
	Kind       string
	PayloadURL string
	LocalID    string
	Title      string
	// Primary is the object's supplied ARK.
	Primary string
	// Files are the job's files as the payload lists them (none for a
	// container until it is unpacked).
	Files []File
}

// BatchRow is a batch's submission, as it was recorded.
type BatchRow struct {
	ID int64
	Submission
	// ShouldersKept is false for a batch submitted before the depositor's
	// shoulders were kept with it (Submission.ARKShoulders is then
	// empty and means nothing).
	ShouldersKept bool
}

// jobColumnsCreated are the columns a batch's jobs are created with.
var jobColumnsCreated = []string{"batch_id", "submitter", "profile", "kind", "payload_url", "local_id", "title", "files", "primary_ark", "submission_mode"}

// CreateJobs writes the jobs of batch b that jobs yields, in tx, in one
// COPY: the sequence is read as COPY asks for rows, so that a batch of
// 100,000 jobs need never sit in memory. The first error the sequence
// yields ends it, and is returned. It returns how many jobs it wrote.
func CreateJobs(ctx context.Context, tx pgx.Tx, b *BatchRow, jobs iter.Seq2[NewJob, error]) (int64, error) {
	next, stop := iter.Pull2(jobs)
	defer stop()
	src := &jobSource{b: b, next: next}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"curator", "jobs"}, jobColumnsCreated, src)
	if src.err != nil {
		// The sequence's own error, not PostgreSQL's text of it.
		return n, fmt.Errorf("create the jobs of batch %d: %w", b.ID, src.err)
	}
	if err != nil {
		return n, fmt.Errorf("create the jobs of batch %d: %w", b.ID, err)
	}
	return n, nil
}

// jobSource is a pgx.CopyFromSource of new jobs.
type jobSource struct {
	b    *BatchRow
	next func() (NewJob, error, bool)
	job  NewJob
	err  error
}

func (s *jobSource) Next() bool {
	j, err, ok := s.next()
	if !ok || err != nil {
		s.err = err
		return false
	}
	s.job = j
	return true
}

func (s *jobSource) Values() ([]any, error) {
	j := s.job
	files := j.Files
	if files == nil {
		files = []File{}
	}
	return []any{s.b.ID, s.b.Submitter, s.b.Profile, j.Kind, j.PayloadURL, j.LocalID, j.Title, files, j.Primary, s.b.SubmissionMode}, nil
}

func (s *jobSource) Err() error { return s.err }

// JobsOf counts the jobs of batch id.
func JobsOf(ctx context.Context, q Querier, batch int64) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE batch_id = $1`, batch).Scan(&n); err != nil {
		return 0, fmt.Errorf("jobs of batch %d: %w", batch, err)
	}
	return n, nil
}

// JobEnd is what a batch's report says of one of its jobs.
type JobEnd struct {
	ID    int64
	State State
	// LastSuccessful is the last state the job left well (where a failed
	// one failed after).
	LastSuccessful State
	Error          string
	ARK            string
	Version        int
	LocalID        string
}

// JobEnds are the jobs of batch id as its report tells them, in order of
// id.
func JobEnds(ctx context.Context, q Querier, batch int64) ([]JobEnd, error) {
	rows, err := q.Query(ctx, `SELECT id, state, last_successful, error, ark, version, local_id FROM curator.jobs WHERE batch_id = $1 ORDER BY id`, batch)
	if err != nil {
		return nil, fmt.Errorf("jobs of batch %d: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[JobEnd])
	if err != nil {
		return nil, fmt.Errorf("jobs of batch %d: %w", batch, err)
	}
	return out, nil
}

// JobVersion is the version of its object job id holds (0: none yet).
func JobVersion(ctx context.Context, q Querier, id int64) (int, error) {
	var v int
	if err := q.QueryRow(ctx, `SELECT version FROM curator.jobs WHERE id = $1`, id).Scan(&v); err != nil {
		return 0, fmt.Errorf("version of job %d: %w", id, err)
	}
	return v, nil
}

// SetJobVersion gives job id version v of its object (0: gives up the one
// it held when it still holds was).
func SetJobVersion(ctx context.Context, q Querier, id int64, v int) error {
	if _, err := q.Exec(ctx, `UPDATE curator.jobs SET version = $2 WHERE id = $1`, id, v); err != nil {
		return fmt.Errorf("job %d takes v%d: %w", id, v, err)
	}
	return nil
}

// AbandonJobVersion gives up version v of job id's object, if the job
// still holds it: the job's next hold takes a new number.
func AbandonJobVersion(ctx context.Context, q Querier, id int64, v int) error {
	if _, err := q.Exec(ctx, `UPDATE curator.jobs SET version = 0 WHERE id = $1 AND version = $2`, id, v); err != nil {
		return fmt.Errorf("job %d gives up v%d: %w", id, v, err)
	}
	return nil
}

// VersionHolder is the job, other than except, storing or recording
// version v of the object ark (0: none).
func VersionHolder(ctx context.Context, q Querier, ark string, v int, except int64) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT id FROM curator.jobs WHERE ark = $1 AND state IN ('storing', 'recording') AND version = $2 AND version > 0 AND id <> $3 LIMIT 1`,
		ark, v, except).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the job storing v%d of %s: %w", v, ark, err)
	}
	return id, nil
}

// JobARK is the ARK job id has ("" none yet).
func JobARK(ctx context.Context, q Querier, id int64) (string, error) {
	var a string
	if err := q.QueryRow(ctx, `SELECT ark FROM curator.jobs WHERE id = $1`, id).Scan(&a); err != nil {
		return "", fmt.Errorf("the ARK of job %d: %w", id, err)
	}
	return a, nil
}

// KeepARK gives job id the ARK a unless it has one, and returns the
// job's.
func KeepARK(ctx context.Context, q Querier, id int64, a string) (string, error) {
	var kept string
	if err := q.QueryRow(ctx, `UPDATE curator.jobs SET ark = CASE WHEN ark = '' THEN $2 ELSE ark END WHERE id = $1 RETURNING ark`, id, a).Scan(&kept); err != nil {
		return "", fmt.Errorf("job %d keeps %s: %w", id, a, err)
	}
	return kept, nil
}

// ForgetARK takes the ARK a from every job that has it.
func ForgetARK(ctx context.Context, q Querier, a string) error {
	if _, err := q.Exec(ctx, `UPDATE curator.jobs SET ark = '' WHERE ark = $1`, a); err != nil {
		return fmt.Errorf("jobs forget %s: %w", a, err)
	}
	return nil
}

// ReservedSpace is the working area's bytes the jobs downloading or
// processing need, but job except's (0: every job's).
func ReservedSpace(ctx context.Context, q Querier, except int64) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT coalesce(sum(space_needed), 0) FROM curator.jobs
		WHERE state IN ('downloading', 'processing') AND id <> $1`, except).Scan(&n); err != nil {
		return 0, fmt.Errorf("room reserved in the working area: %w", err)
	}
	return n, nil
}

// SetSpaceNeeded records that job id needs n bytes of the working area.
func SetSpaceNeeded(ctx context.Context, q Querier, id, n int64) error {
	if _, err := q.Exec(ctx, `UPDATE curator.jobs SET space_needed = $2 WHERE id = $1`, id, n); err != nil {
		return fmt.Errorf("reserve room for job %d: %w", id, err)
	}
	return nil
}

// IdleJobs are the jobs of ids that are in none of the states active (or
// are gone): their working directories hold nothing they need. A failed
// one among them whose requeue would have needed its payload (it failed
// after downloading or processing) is set to restart from downloading, so
// that a requeue fetches the payload again.
func IdleJobs(ctx context.Context, q Querier, ids []int64, active []State) ([]int64, error) {
	rows, err := q.Query(ctx, `WITH idle AS (
			SELECT id FROM unnest($1::bigint[]) AS id
			EXCEPT SELECT id FROM curator.jobs WHERE id = ANY($1) AND state = ANY($2)),
		restart AS (UPDATE curator.jobs SET last_successful = 'provisioning'
			WHERE id IN (SELECT id FROM idle) AND state = 'failed' AND last_successful IN ('downloading', 'processing'))
		SELECT id FROM idle`, ids, active)
	if err != nil {
		return nil, fmt.Errorf("idle jobs: %w", err)
	}
	idle, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("idle jobs: %w", err)
	}
	return idle, nil
}

// BatchOf reads batch id's submission.
func BatchOf(ctx context.Context, q Querier, id int64) (*BatchRow, error) {
	b := &BatchRow{ID: id}
	var shoulders *string
	err := q.QueryRow(ctx, `SELECT submitter, profile, payload_url, type, title, creator, date, callback_url, primary_ark, submission_mode, ark_shoulders
		FROM curator.batches WHERE id = $1`, id).Scan(&b.Submitter, &b.Profile, &b.PayloadURL, &b.Type, &b.Title, &b.Creator, &b.Date, &b.CallbackURL,
		&b.Primary, &b.SubmissionMode, &shoulders)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Entity: Batch, ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", id, err)
	}
	if shoulders != nil {
		b.ARKShoulders, b.ShouldersKept = *shoulders, true
	}
	return b, nil
}

// LastReport is batch id's latest report (nil: none yet) and its
// callback URL.
func LastReport(ctx context.Context, q Querier, batch int64) (report []byte, callback string, err error) {
	if err := q.QueryRow(ctx, `SELECT report, callback_url FROM curator.batches WHERE id = $1`, batch).Scan(&report, &callback); err != nil {
		return nil, "", fmt.Errorf("the report of batch %d: %w", batch, err)
	}
	return report, callback, nil
}

// BatchTraceparent is the trace context of the request that submitted
// batch id ("" when it had none).
func BatchTraceparent(ctx context.Context, q Querier, batch int64) (string, error) {
	var tp string
	if err := q.QueryRow(ctx, `SELECT traceparent FROM curator.batches WHERE id = $1`, batch).Scan(&tp); err != nil {
		return "", fmt.Errorf("the trace of batch %d: %w", batch, err)
	}
	return tp, nil
}
