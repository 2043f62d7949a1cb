package merger_test

import (
	"context"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestHistoryIsPrunedButEveryWorkKeepsItsNewest: explanations older than
// the retention go, a page at a time, except the newest of each work
// (however old: the work still explains itself); younger ones stay.
func TestHistoryIsPrunedButEveryWorkKeepsItsNewest(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	now := time.Now().UTC().Truncate(time.Second)
	day := 24 * time.Hour
	rows := []struct {
		key     string
		version int
		age     time.Duration
	}{
		{"feed:a", 1, 400 * day}, {"feed:a", 2, 300 * day}, {"feed:a", 3, 200 * day}, // a's newest is old: kept
		{"feed:b", 1, 400 * day}, {"feed:b", 2, 10 * day}, // b's old one goes
		{"feed:c", 1, 5 * day}, {"feed:c", 2, day}, // all young: kept
	}
	for _, r := range rows {
		if _, err := db.Exec(ctx, `INSERT INTO curator.work_history (kind, key, version, written_at, members, explanation)
			VALUES ('episode', $1, $2, $3, ARRAY[$1], '{}')`, r.key, time.Unix(int64(r.version), 0), now.Add(-r.age)); err != nil {
			t.Fatal(err)
		}
	}
	before := now.Add(-90 * day)
	var total int64
	for {
		n, err := merger.PruneHistory(ctx, db, before, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != 3 {
		t.Errorf("pruned %d explanations, want 3 (a's two older, b's old one)", total)
	}
	left := map[string][]int64{}
	r, err := db.Query(ctx, `SELECT key, extract(epoch FROM version)::bigint FROM curator.work_history ORDER BY key, version`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var k string
		var v int64
		if err := r.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		left[k] = append(left[k], v)
	}
	if got := len(left["feed:a"]); got != 1 || left["feed:a"][0] != 3 {
		t.Errorf("feed:a keeps %v, want its newest (3) alone", left["feed:a"])
	}
	if got := left["feed:b"]; len(got) != 1 || got[0] != 2 {
		t.Errorf("feed:b keeps %v, want 2", got)
	}
	if got := left["feed:c"]; len(got) != 2 {
		t.Errorf("feed:c keeps %v, want both (young)", got)
	}
}
