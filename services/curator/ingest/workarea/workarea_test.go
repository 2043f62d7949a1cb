package workarea_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/ingest/workarea"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestTidyRemovesOnlyWhatNoJobNeeds: the directories of jobs downloading,
// processing or storing stay; those of ended jobs, of jobs gone from the
// table, and of jobs past storing go; a failed job that had its payload
// is set to download it again on requeue; what is not a job's directory
// is left alone.
func TestTidyRemovesOnlyWhatNoJobNeeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	batch := ingesttest.NewBatch(t, db, ingesttest.Batch{})
	a := &workarea.Area{Dir: t.TempDir(), DB: db, Log: slog.New(slog.DiscardHandler)}
	ids := map[string]int64{}
	for _, j := range []struct{ name, state, last string }{
		{"downloading", "downloading", "provisioning"},
		{"processing", "processing", "downloading"},
		{"storing", "storing", "processing"},
		{"recording", "recording", "storing"},
		{"completed", "completed", "notify"},
		{"failed-with-payload", "failed", "downloading"},
		{"failed-before", "failed", "estimating"},
	} {
		id := ingesttest.NewJob(t, db, ingesttest.Job{Batch: batch, State: j.state, LastSuccessful: j.last})
		ids[j.name] = id
		if err := os.MkdirAll(filepath.Join(a.JobDir(id), "payload"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gone := a.JobDir(1 << 40) // a job no longer in the table
	for _, d := range []string{gone, filepath.Join(a.Dir, "job-7x"), filepath.Join(a.Dir, "notes")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	n, err := a.Tidy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("removed %d directories, want 5 (recording, completed, two failed, gone)", n)
	}
	for name, id := range ids {
		_, err := os.Stat(a.JobDir(id))
		kept := err == nil
		want := name == "downloading" || name == "processing" || name == "storing"
		if kept != want {
			t.Errorf("job %s: directory kept %v, want %v", name, kept, want)
		}
	}
	for _, d := range []string{filepath.Join(a.Dir, "job-7x"), filepath.Join(a.Dir, "notes")} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s is not a job's directory, and was removed", d)
		}
	}
	var restart, before string
	if err := db.QueryRow(ctx, `SELECT (SELECT last_successful FROM curator.jobs WHERE id = $1), (SELECT last_successful FROM curator.jobs WHERE id = $2)`,
		ids["failed-with-payload"], ids["failed-before"]).Scan(&restart, &before); err != nil {
		t.Fatal(err)
	}
	if restart != "provisioning" || before != "estimating" {
		t.Errorf("last successful of the failed jobs: %q and %q, want provisioning (its payload is gone) and estimating", restart, before)
	}
}

// TestAdmitCountsWhatItLetThrough: a job is admitted while the area keeps
// its minimum free, and the bytes it was admitted with count at once, so
// a second job that would overfill the area waits even before the
// reservations are read again; a container's content is reserved into
// its job's row.
func TestAdmitCountsWhatItLetThrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	a := &workarea.Area{Dir: t.TempDir(), DB: db, Log: slog.New(slog.DiscardHandler)}
	var st syscall.Statfs_t
	if err := syscall.Statfs(a.Dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	half := free/2 + free/50
	if ok, err := a.Admit(ctx, 1, half); err != nil || !ok {
		t.Fatalf("the first job, needing %d of %d free bytes: admitted %v, %v", half, free, ok, err)
	}
	if ok, err := a.Admit(ctx, 2, half); err != nil || ok {
		t.Fatalf("the second job, needing as much again: admitted %v, %v; want it to wait", ok, err)
	}
	if ok, err := a.Admit(ctx, 3, 1<<10); err != nil || !ok {
		t.Fatalf("a small job: admitted %v, %v", ok, err)
	}

	batch := ingesttest.NewBatch(t, db, ingesttest.Batch{Type: "container"})
	job := ingesttest.NewJob(t, db, ingesttest.Job{Batch: batch, State: "processing", Kind: "container", PayloadURL: "http://example.org/x.zip", SpaceNeeded: 1000})
	if ok, err := a.ReserveContent(ctx, job, 1000, 5000); err != nil || !ok {
		t.Fatalf("reserve a container's content: %v, %v", ok, err)
	}
	if ok, err := a.ReserveContent(ctx, job, 6000, 2*free); err != nil || ok {
		t.Fatalf("reserve more than the disk: %v, %v; want it to wait", ok, err)
	}
	var space int64
	if err := db.QueryRow(ctx, `SELECT space_needed FROM curator.jobs WHERE id = $1`, job).Scan(&space); err != nil {
		t.Fatal(err)
	}
	if space != 6000 {
		t.Errorf("the container job needs %d bytes, want 6000 (its archive and its content)", space)
	}
}
