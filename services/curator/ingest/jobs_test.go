package ingest_test

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestCreateJobsCopiesWhatTheSequenceYields: a batch's jobs are written as
// the sequence yields them, in one COPY with the batch's submitter,
// profile and mode; a sequence that fails midway (a manifest that breaks
// while it is read) fails the transaction with its error, and leaves no
// job behind.
func TestCreateJobsCopiesWhatTheSequenceYields(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	id := ingesttest.NewBatch(t, db, ingesttest.Batch{Submitter: "radio", Profile: "jingles"})
	b, err := ingest.BatchOf(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	b.SubmissionMode = "update"
	seq := func(fail error, n int) iter.Seq2[ingest.NewJob, error] {
		return func(yield func(ingest.NewJob, error) bool) {
			for i := range n {
				j := ingest.NewJob{Kind: "file", PayloadURL: "https://depositor.example/f", LocalID: string(rune('a' + i)),
					Files: []ingest.File{{URL: "https://depositor.example/f", Name: "f"}}}
				if !yield(j, nil) {
					return
				}
			}
			if fail != nil {
				yield(ingest.NewJob{}, fail)
			}
		}
	}
	broken := errors.New("the manifest broke at its third row")
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := ingest.CreateJobs(ctx, tx, b, seq(broken, 2))
		return err
	})
	if !errors.Is(err, broken) {
		t.Fatalf("a broken sequence: %v, want its error", err)
	}
	if n, err := ingest.JobsOf(ctx, db, id); err != nil || n != 0 {
		t.Fatalf("after a broken sequence: %d jobs (%v), want none", n, err)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		n, err := ingest.CreateJobs(ctx, tx, b, seq(nil, 3))
		if err == nil && n != 3 {
			t.Errorf("copied %d, want 3", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ends, err := ingest.JobEnds(ctx, db, id)
	if err != nil || len(ends) != 3 || ends[2].LocalID != "c" || ends[0].State != ingest.Pending {
		t.Fatalf("the batch's jobs: %+v (%v)", ends, err)
	}
	j, err := ingest.NewStore(db).Job(ctx, ends[0].ID)
	if err != nil || j.Submitter != "radio" || j.Profile != "jingles" || j.Mode != "update" || len(j.Files) != 1 {
		t.Fatalf("a created job: %+v (%v)", j, err)
	}
}
