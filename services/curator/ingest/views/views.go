// Package views is what people see of ingest's batches and jobs: their
// lists, a status with its history and place in the queue, and the counts
// by state the status route and the backlog gauges show. It reads the
// tables package ingest writes, and writes nothing.
package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/archivist/archivist/services/curator/ingest"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listed is a batch or job in a list: what an operator needs to pick one to
// act on.
type Listed struct {
	ID int64 `json:"id"`
	// Batch is a job's batch (0 for a batch).
	Batch   int64        `json:"batch,omitempty"`
	Profile string       `json:"profile"`
	State   ingest.State `json:"state"`
	StateAt time.Time    `json:"state_at"`
	// LocalID is a job's local identifier.
	LocalID string `json:"local_id,omitempty"`
	// Attempts and LastAttemptError are the current state's attempts.
	Attempts         int    `json:"attempts"`
	LastAttemptError string `json:"last_attempt_error,omitempty"`
	// Error is why it failed.
	Error string `json:"error,omitempty"`
	// Submitter is the depositor.
	Submitter string `json:"submitter"`
}

// Filter selects a list: a state (any when empty), a batch's jobs (any
// when 0), a depositor's (any when empty), at most Limit, the newest first.
type Filter struct {
	State     ingest.State
	Batch     int64
	Submitter string
	Limit     int
}

// List lists batches or jobs; a state that is not one of the entity's is
// an InvalidError.
func List(ctx context.Context, s *ingest.Store, e ingest.Entity, f Filter) ([]Listed, error) {
	if f.State != "" && !hasState(e, f.State) {
		return nil, &ingest.InvalidError{Field: "state", Msg: fmt.Sprintf("not a %s state", e)}
	}
	if f.Limit < 1 || f.Limit > 10000 {
		return nil, &ingest.InvalidError{Field: "limit", Msg: "1 to 10000"}
	}
	q := `SELECT id, 0::bigint, profile, state, state_at, '', attempts, last_attempt_error, error, submitter FROM curator.batches
		WHERE ($1 = '' OR state = $1) AND ($3 = '' OR submitter = $3) ORDER BY id DESC LIMIT $2`
	args := []any{f.State, f.Limit, f.Submitter}
	if e == ingest.Job {
		q = `SELECT id, batch_id, profile, state, state_at, local_id, attempts, last_attempt_error, error, submitter FROM curator.jobs
		WHERE ($1 = '' OR state = $1) AND ($3 = '' OR submitter = $3) AND ($4 = 0 OR batch_id = $4) ORDER BY id DESC LIMIT $2`
		args = append(args, f.Batch)
	}
	rows, err := s.DB.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ingest.Table(e), err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Listed])
}

// hasState tells whether the transition table names state for e.
func hasState(e ingest.Entity, state ingest.State) bool {
	for _, t := range ingest.Transitions {
		if t.Entity == e && (t.From == state || t.To == state) {
			return true
		}
	}
	return false
}

// Status is a batch's or job's state, history and (for a batch) its jobs
// by state and report.
type Status struct {
	Entity   ingest.Entity        `json:"entity"`
	ID       int64                `json:"id"`
	State    ingest.State         `json:"state"`
	Error    string               `json:"error,omitempty"`
	Jobs     map[ingest.State]int `json:"jobs,omitempty"`
	History  []HistoryEntry       `json:"history"`
	Report   json.RawMessage      `json:"report,omitempty"`
	Job      *ingest.JobRow       `json:"job,omitempty"`
	Profile  string               `json:"profile"`
	Priority int                  `json:"priority,omitempty"`
	// Queue, for a batch with jobs left, is where they stand in the queue
	// and when the batch may end.
	Queue *Queue `json:"queue,omitempty"`
}

// Queue is a batch's place in the ingest queue, as its depositor follows
// it.
type Queue struct {
	// JobsLeft are its jobs not yet completed, failed or deleted.
	JobsLeft int `json:"jobs_left"`
	// JobsAhead are the pending jobs (anyone's) the queue takes before the
	// batch's first pending one: by priority, then age (the fair share
	// between depositors may take a depositor's own sooner).
	JobsAhead int `json:"jobs_ahead"`
	// JobsPerMinute are the jobs that ended in the last 10 minutes, a
	// minute: the queue's pace.
	JobsPerMinute float64 `json:"jobs_per_minute"`
	// EstimatedEnd is when the batch's jobs would be done at that pace
	// (absent when nothing ended in the window).
	EstimatedEnd *time.Time `json:"estimated_end,omitempty"`
}

// queueOf reads batch id's place in the queue: counts of index ranges (its
// jobs, the pending jobs ahead of its first, the jobs ended in the last
// 10 minutes), so its cost grows with the queue ahead, not the archive.
func queueOf(ctx context.Context, s *ingest.Store, id int64) (*Queue, error) {
	q := &Queue{}
	var ended int
	err := s.DB.QueryRow(ctx, `WITH mine AS (SELECT priority, id FROM curator.jobs WHERE batch_id = $1 AND state = 'pending' ORDER BY priority, id LIMIT 1)
		SELECT (SELECT count(*) FROM curator.jobs WHERE batch_id = $1 AND state <> ALL('{completed,failed,deleted}'))::int,
			coalesce((SELECT count(*) FROM curator.jobs j, mine WHERE j.state = 'pending' AND (j.priority, j.id) < (mine.priority, mine.id)), 0)::int,
			(SELECT count(*) FROM curator.jobs WHERE state = ANY('{completed,failed}') AND state_at > now() - interval '10 minutes')::int`, id).
		Scan(&q.JobsLeft, &q.JobsAhead, &ended)
	if err != nil {
		return nil, fmt.Errorf("batch %d's place in the queue: %w", id, err)
	}
	if q.JobsLeft == 0 {
		return nil, nil
	}
	q.JobsPerMinute = float64(ended) / 10
	if ended > 0 {
		end := time.Now().Add(time.Duration(float64(q.JobsAhead+q.JobsLeft) / q.JobsPerMinute * float64(time.Minute))).UTC().Truncate(time.Second)
		q.EstimatedEnd = &end
	}
	return q, nil
}

// HistoryEntry is one transition.
type HistoryEntry struct {
	From   ingest.State `json:"from"`
	To     ingest.State `json:"to"`
	By     ingest.By    `json:"by"`
	Action string       `json:"action"`
	Detail string       `json:"detail,omitempty"`
	At     time.Time    `json:"at"`
}

// StatusOf reads a batch's or job's status.
func StatusOf(ctx context.Context, s *ingest.Store, e ingest.Entity, id int64) (*Status, error) {
	st := &Status{Entity: e, ID: id, History: []HistoryEntry{}}
	if e == ingest.Batch {
		var report []byte
		err := s.DB.QueryRow(ctx, `SELECT state, error, profile, report FROM curator.batches WHERE id = $1`, id).Scan(&st.State, &st.Error, &st.Profile, &report)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, &ingest.NotFoundError{Entity: e, ID: id}
		} else if err != nil {
			return nil, err
		}
		st.Report = report
		st.Jobs = map[ingest.State]int{}
		rows, err := s.DB.Query(ctx, `SELECT state, count(*) FROM curator.jobs WHERE batch_id = $1 GROUP BY state`, id)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k ingest.State
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return nil, err
			}
			st.Jobs[k] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if st.Queue, err = queueOf(ctx, s, id); err != nil {
			return nil, err
		}
	} else {
		j, err := s.Job(ctx, id)
		if err != nil {
			return nil, err
		}
		// The view shows no credentials: payload URLs without user info or
		// query string.
		j.PayloadURL = ingest.RedactURL(j.PayloadURL)
		files := make([]ingest.File, len(j.Files))
		for i, f := range j.Files {
			f.URL = ingest.RedactURL(f.URL)
			files[i] = f
		}
		j.Files = files
		st.State, st.Error, st.Profile, st.Priority, st.Job = j.State, j.Error, j.Profile, j.Priority, j
	}
	rows, err := s.DB.Query(ctx, `SELECT from_state, to_state, by, action, detail, at FROM curator.ingest_history
		WHERE entity = $1 AND entity_id = $2 ORDER BY id`, e, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var h HistoryEntry
		if err := rows.Scan(&h.From, &h.To, &h.By, &h.Action, &h.Detail, &h.At); err != nil {
			return nil, err
		}
		st.History = append(st.History, h)
	}
	return st, rows.Err()
}

// SubmitterOf is the depositor of batch or job id.
func SubmitterOf(ctx context.Context, s *ingest.Store, e ingest.Entity, id int64) (string, error) {
	var submitter string
	err := s.DB.QueryRow(ctx, `SELECT submitter FROM `+ingest.Table(e)+` WHERE id = $1`, id).Scan(&submitter)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", &ingest.NotFoundError{Entity: e, ID: id}
	}
	if err != nil {
		return "", fmt.Errorf("%s %d: %w", e, id, err)
	}
	return submitter, nil
}
