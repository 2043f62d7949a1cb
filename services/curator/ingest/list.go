package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listed is a batch or job in a list: what an operator needs to pick one to
// act on.
type Listed struct {
	ID int64 `json:"id"`
	// Batch is a job's batch (0 for a batch).
	Batch   int64     `json:"batch,omitempty"`
	Profile string    `json:"profile"`
	State   State     `json:"state"`
	StateAt time.Time `json:"state_at"`
	// LocalID is a job's local identifier.
	LocalID string `json:"local_id,omitempty"`
	// Attempts and LastAttemptError are the current state's attempts.
	Attempts         int    `json:"attempts"`
	LastAttemptError string `json:"last_attempt_error,omitempty"`
	// Error is why it failed.
	Error string `json:"error,omitempty"`
}

// Filter selects a list: a state (any when empty), a batch's jobs (any
// when 0), at most Limit, the newest first.
type Filter struct {
	State State
	Batch int64
	Limit int
}

// List lists batches or jobs; a state that is not one of the entity's is
// an InvalidError.
func (s *Store) List(ctx context.Context, e Entity, f Filter) ([]Listed, error) {
	if f.State != "" && !hasState(e, f.State) {
		return nil, &InvalidError{"state", fmt.Sprintf("not a %s state", e)}
	}
	if f.Limit < 1 || f.Limit > 10000 {
		return nil, &InvalidError{"limit", "1 to 10000"}
	}
	q := `SELECT id, 0::bigint, profile, state, state_at, '', attempts, last_attempt_error, error FROM curator.batches
		WHERE ($1 = '' OR state = $1) ORDER BY id DESC LIMIT $2`
	args := []any{f.State, f.Limit}
	if e == Job {
		q = `SELECT id, batch_id, profile, state, state_at, local_id, attempts, last_attempt_error, error FROM curator.jobs
		WHERE ($1 = '' OR state = $1) AND ($3 = 0 OR batch_id = $3) ORDER BY id DESC LIMIT $2`
		args = append(args, f.Batch)
	}
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", table(e), err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Listed])
}

// hasState tells whether the transition table names state for e.
func hasState(e Entity, state State) bool {
	for _, t := range Transitions {
		if t.Entity == e && (t.From == state || t.To == state) {
			return true
		}
	}
	return false
}
