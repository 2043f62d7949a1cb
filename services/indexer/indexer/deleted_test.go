package indexer_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

// TestDeletedFilesAreNotIndexed: a file deleted from the archive (an
// object withdrawn) is recorded deleted, known or not, and its recording
// announced late does not bring it back; a file its task no longer finds
// in the store is recorded deleted at once (it was tried again, and again,
// for INDEXER_MAX_FAILURES attempts); the repository scan finding a
// deleted key in the store again makes it new, and it is indexed.
func TestDeletedFilesAreNotIndexed(t *testing.T) {
	ctx := context.Background()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	testenv.StartServiceIn(t, indexer.Definition(), sh, map[string]string{
		"INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_SCAN_INTERVAL": "200ms", "INDEXER_DISPATCH_INTERVAL": "50ms", "INDEXER_MAX_FAILURES": "50", "INDEXER_RETRY_BASE": "20ms",
	})
	b := testenv.BusAt(t, sh.NATSURL, "ingest")
	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := registry.New(db, 3)
	wait := func(name, status string) registry.File {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			f, err := reg.Get(ctx, name)
			if err == nil && f.Status == status {
				return f
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v %v, want status %s", name, f, err, status)
			}
		}
	}
	publish := func(ev events.Event) {
		t.Helper()
		if _, _, err := b.PublishEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted before its recording reached the indexer.
	const early = "objects/x/v1/producer/early.warc.gz"
	publish(&events.ObjectDeleted{Object: early})
	wait(early, "deleted")
	publish(&events.ObjectRecorded{Object: early, SHA256: strings.Repeat("0", 64), Size: 10})
	time.Sleep(300 * time.Millisecond)
	wait(early, "deleted")
	// Recorded, then gone from the store before its turn.
	const gone = "objects/x/v1/producer/gone.warc.gz"
	publish(&events.ObjectRecorded{Object: gone, SHA256: strings.Repeat("0", 64), Size: 10})
	if f := wait(gone, "deleted"); f.Failures != 0 {
		t.Errorf("a file gone from the store counted %d failures", f.Failures)
	}
	// Deleted, then in the store again where the scan lists it.
	const back = "warcs/back.warc.gz"
	publish(&events.ObjectDeleted{Object: back})
	wait(back, "deleted")
	if _, err := bs.Put(ctx, back, bytes.NewReader(warcFile("back.example", 2)), nil); err != nil {
		t.Fatal(err)
	}
	wait(back, "indexed")
}
