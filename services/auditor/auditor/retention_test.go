package auditor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestBitLogRetention: checks older than the retention are summed by day
// and outcome and deleted, a page at a time; newer ones stay whole; a
// second trim moves nothing, and the sums add up.
func TestBitLogRetention(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	a := &Auditor{db: db, log: slog.New(slog.DiscardHandler)}
	old := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	// 25,000 old checks over two days (row 1, some row 2 bit errors), 10 new.
	if _, err := db.Exec(ctx, `INSERT INTO auditor.bit_log (object, row_no, success, bit_error, attempt, checks, at)
		SELECT 'o' || i, CASE WHEN i % 100 = 0 THEN 2 ELSE 1 END, i % 100 <> 0, i % 100 = 0, 1, '{}', $1::timestamptz + (i % 2) * interval '1 day'
		FROM generate_series(1, 25000) i`, old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO auditor.bit_log (object, row_no, success, attempt, checks) SELECT 'n' || i, 1, true, 1, '{}' FROM generate_series(1, 10) i`); err != nil {
		t.Fatal(err)
	}
	n, err := a.TrimBitLog(ctx, 365*24*time.Hour)
	if err != nil || n != 25000 {
		t.Fatalf("trimmed %d, %v; want 25000", n, err)
	}
	var left, summed, errors, days int64
	db.QueryRow(ctx, `SELECT count(*) FROM auditor.bit_log`).Scan(&left)
	db.QueryRow(ctx, `SELECT sum(checks), sum(checks) FILTER (WHERE bit_error AND row_no = 2), count(DISTINCT day) FROM auditor.bit_log_summary`).Scan(&summed, &errors, &days)
	if left != 10 || summed != 25000 || errors != 250 || days != 2 {
		t.Errorf("left %d (want 10), summed %d (25000), row-2 bit errors %d (250), days %d (2)", left, summed, errors, days)
	}
	if n, err := a.TrimBitLog(ctx, 365*24*time.Hour); err != nil || n != 0 {
		t.Errorf("a second trim: %d, %v", n, err)
	}
	if n, err := a.TrimBitLog(ctx, 0); err != nil || n != 0 {
		t.Errorf("retention 0 keeps everything: %d, %v", n, err)
	}
}
