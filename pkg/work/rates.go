package work

import (
	"context"
	"fmt"
	"time"
)

// Rates are a queue's flow over a recent window: what came in and went
// out, what waits, and when the backlog would be gone at the rate it
// leaves.
type Rates struct {
	Pipeline string `json:"pipeline"`
	Kind     string `json:"kind"`
	// Window is the seconds In and Out were counted over.
	Window float64 `json:"window_seconds"`
	// In is how many arrived in the window (null where arrivals are not
	// kept).
	In *int `json:"in"`
	// Out is how many left the queue in the window (into a Done state).
	Out int `json:"out"`
	// Backlog is how many wait or are at work now (in an Open state).
	Backlog int `json:"backlog"`
	// DrainSeconds is Backlog over Out's rate: when it would be empty if
	// nothing more came (null when nothing left in the window while some
	// wait: stalled, or nothing waits).
	DrainSeconds *float64 `json:"drain_seconds"`
}

// InPerMinute and OutPerMinute are the window's rates a minute.
func (r Rates) InPerMinute() float64 {
	if r.In == nil || r.Window <= 0 {
		return 0
	}
	return float64(*r.In) * 60 / r.Window
}

// OutPerMinute is what left the queue a minute, over the window.
func (r Rates) OutPerMinute() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Out) * 60 / r.Window
}

// Drain is the drain estimate for a person.
func (r Rates) Drain() string {
	switch {
	case r.Backlog == 0:
		return "empty"
	case r.DrainSeconds == nil:
		return "stalled: nothing left in the window"
	}
	return (time.Duration(*r.DrainSeconds) * time.Second).Round(time.Second).String()
}

// Rates reads the flow of every source with Open states over the window
// (10 minutes when 0): counts of index ranges, so their cost grows with
// the work in the window and the backlog, not with the archive.
func (s *Store) Rates(ctx context.Context, window time.Duration) ([]Rates, error) {
	if window <= 0 {
		window = 10 * time.Minute
	}
	var out []Rates
	for _, src := range s.Sources {
		sq, ok := src.(*SQLSource)
		if !ok || len(sq.Table.Open) == 0 {
			continue
		}
		t := sq.Table
		r := Rates{Pipeline: sq.PipelineName, Kind: sq.KindName, Window: window.Seconds()}
		where := "true"
		if t.Where != "" {
			where = t.Where
		}
		in := "NULL::int"
		if t.Arrived != "" {
			in = fmt.Sprintf("(SELECT count(*) FROM %s WHERE %s AND %s > now() - $3::interval)::int", t.From, where, t.Arrived)
		}
		err := s.DB.QueryRow(ctx, fmt.Sprintf(`SELECT %s,
			(SELECT count(*) FROM %s WHERE %s AND %s = ANY($2::text[]) AND %s > now() - $3::interval)::int,
			(SELECT count(*) FROM %s WHERE %s AND %s = ANY($1::text[]))::int`,
			in, t.From, where, t.State, t.MovedAt, t.From, where, t.State), t.Open, t.Done, window).Scan(&r.In, &r.Out, &r.Backlog)
		if err != nil {
			return nil, fmt.Errorf("rates of %s %ss: %w", sq.PipelineName, sq.KindName, err)
		}
		if r.Out > 0 && r.Backlog > 0 {
			d := float64(r.Backlog) / (float64(r.Out) / window.Seconds())
			r.DrainSeconds = &d
		}
		out = append(out, r)
	}
	if out == nil {
		out = []Rates{}
	}
	return out, nil
}

// RatesRoute is the route of the queues' rates: staff's (they count every
// tenant's work).
const RatesRoute = "GET /v1/work/rates"
