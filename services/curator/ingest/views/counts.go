package views

import (
	"context"
	"fmt"
	"github.com/archivist/archivist/services/curator/ingest"
	"slices"

	"github.com/archivist/archivist/pkg/service"
)

// Backlog is how many batches and jobs are in each state, and how long the
// oldest of each has been in it, in seconds: the ingest backlog gauges.
func Backlog(ctx context.Context, s *ingest.Store) (service.Readings, error) {
	r := service.Readings{}
	// Every state of the table is a series, 0 when empty: an alert on a
	// state compares with a number, not with an absent series.
	for _, e := range []string{"batch", "job"} {
		seen := map[ingest.State]bool{}
		for _, tr := range ingest.Transitions {
			if string(tr.Entity) != e {
				continue
			}
			for _, st := range []ingest.State{tr.From, tr.To} {
				if !seen[st] {
					seen[st] = true
					r["archivist_ingest_items"] = append(r["archivist_ingest_items"], service.Read(0, e, string(st)))
					r["archivist_ingest_oldest_seconds"] = append(r["archivist_ingest_oldest_seconds"], service.Read(0, e, string(st)))
				}
			}
		}
	}
	counts, err := Counts(ctx, s)
	if err != nil {
		return nil, err
	}
	for e, byState := range counts {
		for state, c := range byState {
			set(r, "archivist_ingest_items", service.Read(float64(c.N), string(e), string(state)))
			set(r, "archivist_ingest_oldest_seconds", service.Read(c.OldestSeconds, string(e), string(state)))
		}
	}
	return r, nil
}

// StateCount is how many batches or jobs are in a state, and how long the
// oldest has been in it.
type StateCount struct {
	N             int64   `json:"n"`
	OldestSeconds float64 `json:"oldest_seconds"`
}

// Counts counts batches and jobs by state (GET /v1/ingest/status, the
// backlog gauges).
func Counts(ctx context.Context, s *ingest.Store) (map[ingest.Entity]map[ingest.State]StateCount, error) {
	out := map[ingest.Entity]map[ingest.State]StateCount{ingest.Batch: {}, ingest.Job: {}}
	for e, table := range map[ingest.Entity]string{ingest.Batch: "curator.batches", ingest.Job: "curator.jobs"} {
		rows, err := s.DB.Query(ctx, `SELECT state, count(*), extract(epoch FROM now() - min(state_at))::float8 FROM `+table+` GROUP BY state`)
		if err != nil {
			return nil, fmt.Errorf("ingest counts: %w", err)
		}
		for rows.Next() {
			var state ingest.State
			var c StateCount
			if err := rows.Scan(&state, &c.N, &c.OldestSeconds); err != nil {
				rows.Close()
				return nil, err
			}
			out[e][state] = c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// set replaces the reading of r's family with the same labels, or adds it.
func set(r service.Readings, family string, v service.Reading) {
	for i, old := range r[family] {
		if slices.Equal(old.Labels, v.Labels) {
			r[family][i] = v
			return
		}
	}
	r[family] = append(r[family], v)
}

// BacklogGauges are the families Backlog reads.
var BacklogGauges = []service.Gauge{
	{Name: "archivist_ingest_items", Help: "Ingest batches and jobs by state.", Labels: []string{"entity", "state"}},
	{Name: "archivist_ingest_oldest_seconds", Help: "How long the oldest batch or job of a state has been in it.", Labels: []string{"entity", "state"}},
}
