// Package report makes a batch's report: its jobs by state, its failed
// jobs and completed objects, and, after the first, what changed since the
// previous one.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Report is a batch's report. It is stored in the blob store (under
// reports/batch-ID.json, and each report of the batch under
// reports/batch-ID-SEQUENCE.json) and on the batch row, and sent to the
// batch's callback URL.
type Report struct {
	// Type is "batch-report", which tells it from a job's callback.
	Type      string               `json:"type"`
	Batch     int64                `json:"batch"`
	Jobs      map[ingest.State]int `json:"jobs"`
	Failed    []FailedJob          `json:"failed,omitempty"`
	Objects   []ReportedObject     `json:"objects"`
	WrittenAt time.Time            `json:"written_at"`
	// Sequence numbers the batch's reports from 1 (update-reporting writes
	// the next).
	Sequence int `json:"sequence"`
	// PreviousWrittenAt and Changes, in a report after the first, say when
	// the previous one was written and which jobs changed since.
	PreviousWrittenAt *time.Time  `json:"previous_written_at,omitempty"`
	Changes           []JobChange `json:"changes,omitempty"`
}

// JobChange is a job whose outcome changed between two reports: Was and
// Now are "completed vN", "failed in STATE" or "not reported".
type JobChange struct {
	Job int64  `json:"job"`
	Was string `json:"was"`
	Now string `json:"now"`
}

// outcomes are a report's jobs' outcomes, by job.
func (r *Report) outcomes() map[int64]string {
	out := map[int64]string{}
	for _, o := range r.Objects {
		out[o.Job] = fmt.Sprintf("completed v%d", o.Version)
	}
	for _, f := range r.Failed {
		out[f.Job] = fmt.Sprintf("failed in %s", f.State)
	}
	return out
}

// ChangesSince lists the jobs whose outcome differs from prev's, by job.
func (r *Report) ChangesSince(prev *Report) []JobChange {
	was, now := prev.outcomes(), r.outcomes()
	var jobs []int64
	for j := range was {
		jobs = append(jobs, j)
	}
	for j := range now {
		if _, ok := was[j]; !ok {
			jobs = append(jobs, j)
		}
	}
	slices.Sort(jobs)
	var out []JobChange
	for _, j := range jobs {
		w, n := was[j], now[j]
		if w == n {
			continue
		}
		if w == "" {
			w = "not reported"
		}
		if n == "" {
			n = "not reported"
		}
		out = append(out, JobChange{Job: j, Was: w, Now: n})
	}
	return out
}

// FailedJob is a failed job in a report.
type FailedJob struct {
	Job   int64        `json:"job"`
	State ingest.State `json:"last_successful"`
	Error string       `json:"error"`
}

// ReportedObject is a completed object in a report.
type ReportedObject struct {
	Job     int64  `json:"job"`
	ARK     string `json:"ark"`
	Version int    `json:"version"`
	LocalID string `json:"local_id,omitempty"`
}

// Write makes the next report of batch id from its jobs as they are now,
// numbered after the previous one kept on the batch (whose unreadable
// copy is logged and replaced by a first), and returns it with the
// batch's callback URL.
func Write(ctx context.Context, db *pgxpool.Pool, id int64, log *slog.Logger) (*Report, string, error) {
	rep := &Report{Type: "batch-report", Batch: id, Jobs: map[ingest.State]int{}, Objects: []ReportedObject{}, WrittenAt: time.Now().UTC(), Sequence: 1}
	prevRaw, callback, err := ingest.LastReport(ctx, db, id)
	if err != nil {
		return nil, "", err
	}
	var prev *Report
	if len(prevRaw) > 0 {
		prev = &Report{}
		if err := json.Unmarshal(prevRaw, prev); err != nil {
			log.WarnContext(ctx, "ingest: the previous report is unreadable; writing a first one", "batch", id, "err", err)
			prev = nil
		}
	}
	ends, err := ingest.JobEnds(ctx, db, id)
	if err != nil {
		return nil, "", err
	}
	for _, j := range ends {
		rep.Jobs[j.State]++
		switch j.State {
		case ingest.Failed:
			rep.Failed = append(rep.Failed, FailedJob{Job: j.ID, State: j.LastSuccessful, Error: j.Error})
		case ingest.Completed:
			rep.Objects = append(rep.Objects, ReportedObject{Job: j.ID, ARK: j.ARK, Version: j.Version, LocalID: j.LocalID})
		}
	}
	if prev != nil {
		rep.Sequence = prev.Sequence + 1
		at := prev.WrittenAt
		rep.PreviousWrittenAt = &at
		rep.Changes = rep.ChangesSince(prev)
	}
	return rep, callback, nil
}

// Outcome is the batch's move once its report is written: completed when
// every job completed or was deleted, else failed, with the detail saying
// how many.
func (r *Report) Outcome() (ingest.State, string) {
	to, detail := ingest.Completed, fmt.Sprintf("%d objects", len(r.Objects))
	open := 0
	for st, n := range r.Jobs {
		if st != ingest.Completed && st != ingest.Deleted {
			open += n
		}
	}
	if open > 0 {
		to, detail = ingest.Failed, fmt.Sprintf("%d of %d jobs not completed", open, open+r.Jobs[ingest.Completed])
	}
	if len(r.Changes) > 0 {
		detail += fmt.Sprintf("; %d changed since report %d", len(r.Changes), r.Sequence-1)
	}
	return to, detail
}
