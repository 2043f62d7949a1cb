package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestMoveWritesItsColumns: the columns a move sets are written by the
// move's own statement, its time worked is added to the row's, and a
// column it does not set is left as it was (an empty list of files is
// written; no list leaves them).
func TestMoveWritesItsColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	batch := ingesttest.NewBatch(t, db, ingesttest.Batch{})
	job := ingesttest.NewJob(t, db, ingesttest.Job{Batch: batch, State: "estimating", Worked: 2 * time.Second})
	s := ingest.NewStore(db)
	prio, size := 10, int64(12345)
	files := []ingest.File{{URL: "http://example.org/a.txt", Name: "a.txt", Size: 12345}}
	var row ingest.JobRow
	err := s.MoveOnRow(ctx, db, ingest.Job, job, ingest.Estimating, ingest.Provisioning, ingest.Daemon, "estimated",
		ingest.Columns{Priority: &prio, SpaceNeeded: &size, Files: &files, Worked: 3 * time.Second}, nil, &row)
	if err != nil {
		t.Fatal(err)
	}
	if row.Priority != 10 || row.SpaceNeeded != 12345 || len(row.Files) != 1 || row.Files[0].Name != "a.txt" || row.State != ingest.Provisioning {
		t.Errorf("the move left priority %d, space %d, files %+v, state %s; want 10, 12345, [a.txt], provisioning", row.Priority, row.SpaceNeeded, row.Files, row.State)
	}
	// The next move sets the version and empties the files; the priority
	// and space it does not name stay.
	v, none := 3, []ingest.File{}
	if err := s.MoveOnRow(ctx, db, ingest.Job, job, ingest.Provisioning, ingest.Downloading, ingest.Daemon, "",
		ingest.Columns{Version: &v, Files: &none}, nil, &row); err != nil {
		t.Fatal(err)
	}
	var worked time.Duration
	if err := db.QueryRow(ctx, `SELECT worked FROM curator.jobs WHERE id = $1`, job).Scan(&worked); err != nil {
		t.Fatal(err)
	}
	if row.Version != 3 || len(row.Files) != 0 || row.Priority != 10 || row.SpaceNeeded != 12345 || worked != 5*time.Second {
		t.Errorf("after the second move: version %d, files %+v, priority %d, space %d, worked %s; want 3, [], 10, 12345, 5s",
			row.Version, row.Files, row.Priority, row.SpaceNeeded, worked)
	}
	// A batch's report.
	if err := s.MoveOnRow(ctx, db, ingest.Batch, batch, ingest.Processing, ingest.Reporting, ingest.Auto, "",
		ingest.Columns{Report: []byte(`{"jobs": 1}`)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var report string
	if err := db.QueryRow(ctx, `SELECT report::text FROM curator.batches WHERE id = $1`, batch).Scan(&report); err != nil {
		t.Fatal(err)
	}
	if report != `{"jobs": 1}` {
		t.Errorf("report %s, want {\"jobs\": 1}", report)
	}
}
