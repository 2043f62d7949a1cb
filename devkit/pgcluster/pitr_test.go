package pgcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPointInTimeRecovery restores a database to the moment before a
// mistake with PostgreSQL's own tools, as docs/DEPLOY.md's "Backups" has
// an operator do (and CloudNativePG does with the same base backup and
// WAL archive): continuous archiving, a base backup (pg_basebackup), rows
// written after it, a table dropped; recovered to a time between, the
// rows written after the base backup are there and the table is not
// dropped; recovered to the archive's end, the drop is replayed too.
func TestPointInTimeRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "pitr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// PostgreSQL runs as its own user when the test is root: it must
	// reach the directories below.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, "wal-archive")
	c := &Cluster{Dir: filepath.Join(root, "primary"), Durable: true, Settings: ArchiveSettings(archive)}
	if err := c.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.PrepareArchive(archive); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	db := connect(ctx, t, c)
	exec1 := func(conn *pgx.Conn, sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec1(db, "CREATE TABLE deposits (id int PRIMARY KEY, label text NOT NULL)")
	exec1(db, "INSERT INTO deposits SELECT g, 'before the backup' FROM generate_series(1, 100) g")

	base := filepath.Join(root, "base")
	if err := c.BaseBackup(ctx, base); err != nil {
		t.Fatal(err)
	}

	exec1(db, "INSERT INTO deposits SELECT g, 'after the backup' FROM generate_series(101, 250) g")
	var target time.Time
	if err := db.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&target); err != nil {
		t.Fatal(err)
	}
	// The mistake, committed after the target.
	exec1(db, "SELECT pg_sleep(0.01)")
	exec1(db, "DROP TABLE deposits")
	// The segment holding the drop is archived when it is completed.
	var segment string
	if err := db.QueryRow(ctx, "SELECT pg_walfile_name(pg_switch_wal())").Scan(&segment); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(archive, segment)); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("WAL segment %s never archived (archive_command): %v", segment, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	db.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	recovered := func(name string, to time.Time) *pgx.Conn {
		t.Helper()
		dir := filepath.Join(root, name)
		if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
			t.Fatalf("copy the base backup: %v: %s", err, out)
		}
		if err := Recover(dir, archive, to); err != nil {
			t.Fatal(err)
		}
		r := &Cluster{Dir: dir}
		if err := r.Init(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Stop() })
		conn := connect(ctx, t, r)
		// Promoted at the target: open for writes.
		for {
			var inRecovery bool
			if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
				t.Fatal(err)
			}
			if !inRecovery {
				return conn
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s still recovering: %v", name, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	conn := recovered("before-the-mistake", target)
	var before, after int
	if err := conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE label = 'before the backup'), count(*) FILTER (WHERE label = 'after the backup') FROM deposits").Scan(&before, &after); err != nil {
		t.Fatalf("the table dropped after the target is not there: %v", err)
	}
	if before != 100 || after != 150 {
		t.Errorf("recovered to the target: %d rows from before the backup and %d from after, want 100 and 150", before, after)
	}
	exec1(conn, "INSERT INTO deposits VALUES (251, 'after the recovery')")

	end := recovered("to-the-end", time.Time{})
	var exists bool
	if err := end.QueryRow(ctx, "SELECT to_regclass('deposits') IS NOT NULL").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("recovered to the archive's end, the drop was not replayed: the target, not the base backup, kept the rows above")
	}
}

func connect(ctx context.Context, t *testing.T, c *Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
