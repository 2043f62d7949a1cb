package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/archivist/archivist/pkg/service"
	"github.com/jackc/pgx/v5"
)

// Status is a batch's or job's state, history and (for a batch) its jobs
// by state and report.
type Status struct {
	Entity   Entity          `json:"entity"`
	ID       int64           `json:"id"`
	State    State           `json:"state"`
	Error    string          `json:"error,omitempty"`
	Jobs     map[State]int   `json:"jobs,omitempty"`
	History  []HistoryEntry  `json:"history"`
	Report   json.RawMessage `json:"report,omitempty"`
	Job      *JobRow         `json:"job,omitempty"`
	Profile  string          `json:"profile"`
	Priority int             `json:"priority,omitempty"`
}

// HistoryEntry is one transition.
type HistoryEntry struct {
	From   State     `json:"from"`
	To     State     `json:"to"`
	By     By        `json:"by"`
	Action string    `json:"action"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// Status reads a batch's or job's status.
func (s *Store) Status(ctx context.Context, e Entity, id int64) (*Status, error) {
	st := &Status{Entity: e, ID: id, History: []HistoryEntry{}}
	if e == Batch {
		var report []byte
		err := s.db.QueryRow(ctx, `SELECT state, error, profile, report FROM curator.batches WHERE id = $1`, id).Scan(&st.State, &st.Error, &st.Profile, &report)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, &NotFoundError{e, id}
		} else if err != nil {
			return nil, err
		}
		st.Report = report
		st.Jobs = map[State]int{}
		rows, err := s.db.Query(ctx, `SELECT state, count(*) FROM curator.jobs WHERE batch_id = $1 GROUP BY state`, id)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k State
			var n int
			rows.Scan(&k, &n)
			st.Jobs[k] = n
		}
		rows.Close()
	} else {
		j, err := s.Job(ctx, id)
		if err != nil {
			return nil, err
		}
		// The view shows no credentials: payload URLs without user info or
		// query string.
		j.PayloadURL = redactURL(j.PayloadURL)
		files := make([]File, len(j.Files))
		for i, f := range j.Files {
			f.URL = redactURL(f.URL)
			files[i] = f
		}
		j.Files = files
		st.State, st.Error, st.Profile, st.Priority, st.Job = j.State, j.Error, j.Profile, j.Priority, j
	}
	rows, err := s.db.Query(ctx, `SELECT from_state, to_state, by, action, detail, at FROM curator.ingest_history
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

// Visible is nil when the caller may read batch or job id: an operator or
// reader any, a depositor its own. Another's is "not found", as an unknown
// id: a depositor learns nothing of others' work, not even that it exists.
func (s *Store) Visible(ctx context.Context, e Entity, id int64) error {
	caller, _ := service.Caller(ctx)
	if !caller.OwnOnly() {
		return nil
	}
	var submitter string
	err := s.db.QueryRow(ctx, `SELECT submitter FROM `+table(e)+` WHERE id = $1`, id).Scan(&submitter)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && submitter != caller.Name) {
		return &NotFoundError{e, id}
	}
	if err != nil {
		return fmt.Errorf("%s %d: %w", e, id, err)
	}
	return nil
}
