package indexer_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

// TestIndexingLongerThanTheStaleTimeIsRecorded: a file whose indexing took
// longer than INDEXER_STALE_AFTER was taken for the file of a dead indexer,
// handed out again, and its output never recorded. A live indexer touches
// its claim while it works: the file is indexed on its first attempt.
func TestIndexingLongerThanTheStaleTimeIsRecorded(t *testing.T) {
	ctx := context.Background()
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := warcFile("long.example", 12)
	if len(file) < 64*25 {
		t.Fatalf("the file is %d bytes: too short to outlast the 1 s stale time at 64 bytes per 100 ms", len(file))
	}
	local.Put(ctx, "warcs/long.warc.gz", bytes.NewReader(file), nil)
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: slowStore{local, "warcs/long.warc.gz", 64, 100 * time.Millisecond}}
	testenv.StartServiceIn(t, indexer.Definition(), sh, map[string]string{
		"INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_DISPATCH_INTERVAL": "50ms",
		"INDEXER_TASK_TIMEOUT": "1m", "INDEXER_STALE_AFTER": "1s",
	})
	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := registry.New(db, 3)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		f, _ := reg.Get(ctx, "warcs/long.warc.gz")
		if f.Status == "indexed" {
			var attempts int
			db.QueryRow(ctx, `SELECT attempts FROM indexer.files WHERE name = 'warcs/long.warc.gz'`).Scan(&attempts)
			if attempts != 1 || f.Failures != 0 {
				t.Errorf("indexed %+v after %d attempts: want its first attempt, no failure", f, attempts)
			}
			return
		}
		if f.Status == "parked" || time.Now().After(deadline) {
			t.Fatalf("file %+v", f)
		}
	}
}
