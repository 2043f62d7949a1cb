// Package ingesttest puts ingest's rows where a test needs them: a batch,
// a job in any state, without walking the pipeline there. Only tests use
// it; the ingest packages write their rows through their own code.
package ingesttest

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is a database connection or pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Batch is a batch row; empty fields take the defaults: submitter "s",
// profile "p", payload URL http://example.org/x, type "file", state
// "processing".
type Batch struct {
	Submitter, Profile, PayloadURL, Type, State string
}

// NewBatch inserts b and returns its id.
func NewBatch(tb testing.TB, db Querier, b Batch) int64 {
	tb.Helper()
	var id int64
	if err := db.QueryRow(context.Background(), `INSERT INTO curator.batches (submitter, profile, payload_url, type, state)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`, cmp.Or(b.Submitter, "s"), cmp.Or(b.Profile, "p"), cmp.Or(b.PayloadURL, "http://example.org/x"),
		cmp.Or(b.Type, "file"), cmp.Or(b.State, "processing")).Scan(&id); err != nil {
		tb.Fatalf("ingesttest: insert batch: %v", err)
	}
	return id
}

// Job is a job row of batch Batch; empty fields take the table's defaults,
// but profile ("p"), kind ("file") and payload URL
// (http://example.org/x), which it has none of.
type Job struct {
	Batch                                                       int64
	Submitter, Profile, Kind, PayloadURL, State, LastSuccessful string
	Error, ARK, LocalID, PrimaryARK                             string
	SpaceNeeded                                                 int64
	Worked                                                      time.Duration
}

// NewJob inserts j and returns its id.
func NewJob(tb testing.TB, db Querier, j Job) int64 {
	tb.Helper()
	cols := []string{"batch_id", "profile", "kind", "payload_url"}
	args := []any{j.Batch, cmp.Or(j.Profile, "p"), cmp.Or(j.Kind, "file"), cmp.Or(j.PayloadURL, "http://example.org/x")}
	set := func(col string, v any, zero bool) {
		if !zero {
			cols, args = append(cols, col), append(args, v)
		}
	}
	set("submitter", j.Submitter, j.Submitter == "")
	set("state", j.State, j.State == "")
	set("last_successful", j.LastSuccessful, j.LastSuccessful == "")
	set("error", j.Error, j.Error == "")
	set("ark", j.ARK, j.ARK == "")
	set("local_id", j.LocalID, j.LocalID == "")
	set("primary_ark", j.PrimaryARK, j.PrimaryARK == "")
	set("space_needed", j.SpaceNeeded, j.SpaceNeeded == 0)
	set("worked", j.Worked, j.Worked == 0)
	marks := make([]string, len(cols))
	for i := range marks {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	var id int64
	if err := db.QueryRow(context.Background(), `INSERT INTO curator.jobs (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(marks, ", ")+`) RETURNING id`,
		args...).Scan(&id); err != nil {
		tb.Fatalf("ingesttest: insert job: %v", err)
	}
	return id
}
