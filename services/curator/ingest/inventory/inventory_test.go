package inventory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/archivist/archivist/services/curator/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const objectARK = "ark:/99999/fk4inv1"

// newInventory is a database of the curator's schema and a store.
func newInventory(t *testing.T) (*pgxpool.Pool, blob.Store) {
	t.Helper()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return testenv.DB(t, migrations.Schema), bs
}

// newJob inserts a job of objectARK in state storing and returns its row.
func newJob(t *testing.T, db *pgxpool.Pool, files ...ingest.File) *ingest.JobRow {
	t.Helper()
	batch := ingesttest.NewBatch(t, db, ingesttest.Batch{})
	j := &ingest.JobRow{BatchID: batch, Profile: "p", ARK: objectARK, LocalID: "local", Title: "t", Files: files}
	j.ID = ingesttest.NewJob(t, db, ingesttest.Job{Batch: batch, State: "storing", ARK: objectARK})
	return j
}

// TestOneJobAtATimeStoresAVersion: the versions of an object are given one
// at a time, kept by a retry, never given twice even when the database
// forgot one the store holds, and refused for a withdrawn object; a
// version in mode add carries the files of the last one that it does not
// replace.
func TestOneJobAtATimeStoresAVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, bs := newInventory(t)
	a := newJob(t, db)
	b := newJob(t, db, ingest.File{Name: "two.txt"})

	if v, err := inventory.Hold(ctx, db, bs, a); err != nil || v != 1 {
		t.Fatalf("the first job's hold: v%d, %v; want v1", v, err)
	}
	if _, err := inventory.Hold(ctx, db, bs, b); !errors.Is(err, inventory.ErrWait) {
		t.Fatalf("a second job while the first stores: %v, want ErrWait", err)
	}
	if v, err := inventory.Hold(ctx, db, bs, a); err != nil || v != 1 {
		t.Fatalf("the first job again (a retry): v%d, %v; want v1 still", v, err)
	}

	// The first job records v1 with two files and completes.
	files := []inventory.File{
		{Path: "producer/one.txt", Key: inventory.Key(objectARK, 1, "producer/one.txt"), SHA256: "aa", Size: 1},
		{Path: "producer/two.txt", Key: inventory.Key(objectARK, 1, "producer/two.txt"), SHA256: "bb", Size: 2},
		{Path: "system/mrt-manifest.checkm", Key: inventory.Key(objectARK, 1, "system/mrt-manifest.checkm"), SHA256: "cc", Size: 3},
	}
	for range 2 { // a retry writes nothing twice
		if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return inventory.Record(ctx, tx, a, files) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE curator.jobs SET state = 'completed' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	// v2 is in the store though the database never gave it (restored from
	// before it was): the next job gets v3.
	if _, err := bs.Put(ctx, inventory.Key(objectARK, 2, "producer/x"), bytes.NewReader([]byte("x")), nil); err != nil {
		t.Fatal(err)
	}
	v, err := inventory.Hold(ctx, db, bs, b)
	if err != nil || v != 3 {
		t.Fatalf("the second job once the first completed: v%d, %v; want v3 (v2 is in the store)", v, err)
	}
	carried, err := inventory.Carried(ctx, db, b, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(carried) != 1 || carried[0].Name != "one.txt" || carried[0].Key != files[0].Key || carried[0].SHA256 != "aa" {
		t.Errorf("carried into v3: %+v; want one.txt under its v1 key (two.txt is replaced, system files are not carried)", carried)
	}
	var versions, rows int
	if err := db.QueryRow(ctx, `SELECT (SELECT versions FROM curator.inventory_objects WHERE ark = $1),
		(SELECT count(*) FROM curator.inventory_files WHERE ark = $1)`, objectARK).Scan(&versions, &rows); err != nil {
		t.Fatal(err)
	}
	if versions != 1 || rows != 3 {
		t.Errorf("inventory: %d versions, %d file rows; want 1 and 3", versions, rows)
	}

	// Abandoned (the store refused its files), the job's next hold is a
	// new number.
	if err := inventory.Abandon(ctx, db, b); err != nil || b.Version != 0 {
		t.Fatalf("abandon: %v, version %d", err, b.Version)
	}
	if v, err := inventory.Hold(ctx, db, bs, b); err != nil || v != 4 {
		t.Fatalf("after abandoning v3: v%d, %v; want v4", v, err)
	}

	// Withdrawn, the object takes no version: permanently.
	if _, err := db.Exec(ctx, `UPDATE curator.inventory_objects SET withdrawn_at = now(), withdrawn_reason = 'takedown' WHERE ark = $1`, objectARK); err != nil {
		t.Fatal(err)
	}
	c := newJob(t, db)
	_, err = inventory.Hold(ctx, db, bs, c)
	var w *inventory.WithdrawnError
	if !errors.As(err, &w) || !fault.IsPermanent(err) || w.Reason != "takedown" {
		t.Errorf("a deposit into a withdrawn object: %v; want a permanent WithdrawnError naming the reason", err)
	}
}

// TestAHoldWaitingOnAWithdrawalSeesIt: a deposit whose hold waits on the
// object's lock while a withdrawal of the object commits takes no version
// of it (a takedown sticks). The withdrawal here is held open until the
// hold is seen waiting on it, so the race that once let a waiting deposit
// read the object as it was before (READ COMMITTED: a statement that
// waited for a row re-reads that row alone) is forced, not hoped for.
func TestAHoldWaitingOnAWithdrawalSeesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, bs := newInventory(t)
	a := newJob(t, db)
	if v, err := inventory.Hold(ctx, db, bs, a); err != nil || v != 1 {
		t.Fatalf("the first job's hold: v%d, %v; want v1", v, err)
	}
	files := []inventory.File{{Path: "producer/one.txt", Key: inventory.Key(objectARK, 1, "producer/one.txt"), SHA256: "aa", Size: 1}}
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return inventory.Record(ctx, tx, a, files) }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE curator.jobs SET state = 'completed' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}

	// The withdrawal: the object withdrawn and its lock taken, in a
	// transaction not yet committed.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE curator.inventory_objects SET withdrawn_at = now(), withdrawn_reason = 'takedown' WHERE ark = $1`, objectARK); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM curator.ark_versions WHERE ark = $1 FOR UPDATE`, objectARK); err != nil {
		t.Fatal(err)
	}
	b := newJob(t, db)
	held := make(chan error, 1)
	go func() {
		_, err := inventory.Hold(ctx, db, bs, b)
		held <- err
	}()
	// The deposit's hold waits on the lock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-held:
			t.Fatalf("the hold returned (%v) while the withdrawal held the object's lock", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the hold is not waiting on the withdrawal's lock after 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var w *inventory.WithdrawnError
	if err := <-held; !errors.As(err, &w) || !fault.IsPermanent(err) {
		t.Errorf("a deposit that waited on the object's withdrawal: %v; want a permanent WithdrawnError", err)
	}
}

// TestKeysNeverCollide: two spellings of one ARK share their keys; no two
// distinct (identifier, version, path) do, and a spelling that is no ARK
// gets a prefix no ARK's has.
func TestKeysNeverCollide(t *testing.T) {
	t.Parallel()
	if a, b := inventory.Key("ark:/99999/fk4a", 1, "x"), inventory.Key("ark:99999/fk4a", 1, "x"); a != b {
		t.Errorf("two spellings of one ARK: keys %s and %s", a, b)
	}
	seen := map[string]string{}
	for _, a := range []string{"ark:/99999/fk4a", "ark:/99999/fk4a/b", "ark:/99999/fk4a_b", "ark:/99999/fk4a%2Fb", "not an ark", "objects/ark:99999"} {
		for _, v := range []int{1, 11} {
			for _, p := range []string{"producer/x", "1/producer/x"} {
				k := inventory.Key(a, v, p)
				id := fmt.Sprintf("%s v%d %s", a, v, p)
				if other, ok := seen[k]; ok {
					t.Errorf("%q and %q share the key %s", other, id, k)
				}
				seen[k] = id
			}
		}
	}
}
