package registry_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	kit "github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestFailedFilesAreFoundAndIndexedAgain: files that failed or were
// parked by the bad-reputation rule are found by the words of their error;
// a retry of what a dry run counted sets them to be indexed from the
// start, with the action in each file's history; a skip parks a new file.
func TestFailedFilesAreFoundAndIndexedAgain(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	for i, st := range []string{"failed", "parked", "parked", "indexed", "new", "failed"} {
		if _, err := db.Exec(ctx, `INSERT INTO indexer.files (name, kind, status, failures, last_error)
			VALUES ($1, 'warc', $2, $3, $4)`, fmt.Sprintf("warcs/f%d.warc.gz", i), st, i,
			map[bool]string{true: "gzip: invalid header at offset 1024", false: ""}[st == "failed" || st == "parked"]); err != nil {
			t.Fatal(err)
		}
	}
	woken := 0
	ws := registry.New(db, 5).Work(func() { woken++ })
	f := kit.Filter{Pipeline: "index", Query: "invalid header"}
	p, err := ws.Find(ctx, f, "", 50)
	if err != nil || len(p.Items) != 4 {
		t.Fatalf("found %+v, %v; want the 4 failed and parked", p.Items, err)
	}
	c, err := ws.DryRun(ctx, kit.Retry, f)
	if err != nil || c.N != 4 {
		t.Fatalf("dry run %+v, %v", c, err)
	}
	a, err := ws.Act(ctx, kit.Retry, f, 4, "ops")
	if err != nil || a.Moved != 4 || woken != 1 {
		t.Fatalf("retry %+v, %v", a, err)
	}
	var fresh int
	db.QueryRow(ctx, `SELECT count(*) FROM indexer.files WHERE status = 'new' AND last_error = ''`).Scan(&fresh)
	if fresh != 5 {
		t.Fatalf("%d files new after the retry, want 5", fresh)
	}
	h, err := registry.New(db, 5).History(ctx, "warcs/f2.warc.gz")
	if err != nil {
		t.Fatal(err)
	}
	if last := h.Events[len(h.Events)-1]; last.What != "retry" || last.Detail != fmt.Sprintf("work action %d by ops", a.ID) {
		t.Fatalf("history %+v", h.Events)
	}
	skip := kit.Filter{ID: "warcs/f4.warc.gz"}
	if _, err := ws.Act(ctx, kit.Skip, skip, 1, "ops"); err != nil {
		t.Fatal(err)
	}
	if p, _ := ws.Find(ctx, skip, "", 5); len(p.Items) != 1 || p.Items[0].State != "parked" || p.Items[0].Verbs[0] != kit.Retry {
		t.Fatalf("skipped: %+v", p.Items)
	}
}
