package indexer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/checkpoint"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

// TestRecordedFilesARestoreLostAreTakenAgain: the database restored to a
// backup (the files registered since, and its checkpoint, gone) while the
// bus kept going: the leader sees its checkpoint go back and takes the
// recordings since again, and a new leadership does so from the
// checkpoint it finds. Before the checkpoint, a file whose recording the
// indexer took after the backup was never indexed (with no repository
// scan of objects/, as compose and the chart run it).
func TestRecordedFilesARestoreLostAreTakenAgain(t *testing.T) {
	ctx := context.Background()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.DB(t, migrations.Schema)
	b := testenv.Bus(t, "curator")
	reg := registry.New(db, 3)
	ix := indexer.New(b, reg, bs, indexer.Config{}, testenv.Logger(t))
	sub, err := bus.Consume(ctx, b, events.IndexerRecorded, ix.Recorded)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	lead := func() (stop func()) {
		return testenv.Go(t, ix.Checkpoint(db, sub, checkpoint.WithInterval(20*time.Millisecond), checkpoint.WithLogger(testenv.Logger(t))).Run)
	}
	stopLeader := lead()

	var last uint64
	record := func(name string) {
		t.Helper()
		_, ack, err := b.PublishEvent(ctx, &events.ObjectRecorded{Object: name, SHA256: strings.Repeat("0", 64), Size: 10})
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	checkpointed := func() uint64 {
		var s int64
		if err := db.QueryRow(ctx, `SELECT coalesce((SELECT stream_seq FROM indexer.checkpoints WHERE consumer = $1), 0)`,
			events.IndexerRecorded.Config.Durable).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return uint64(s)
	}
	known := func(names ...string) bool {
		for _, n := range names {
			if _, err := reg.Get(ctx, n); err != nil {
				return false
			}
		}
		return true
	}
	record("objects/a/v1/producer/crawl.warc.gz")
	testenv.Eventually(t, 10*time.Second, "the first file registered and checkpointed", func() bool {
		return known("objects/a/v1/producer/crawl.warc.gz") && checkpointed() == last
	})
	backup := last
	// A deletion on the same stream goes to another consumer: not handed
	// to Recorded again.
	if _, _, err := b.PublishEvent(ctx, &events.ObjectDeleted{Object: "objects/z/v1/producer/crawl.warc.gz"}); err != nil {
		t.Fatal(err)
	}
	after := []string{"objects/b/v1/producer/crawl.warc.gz", "objects/c/v1/producer/crawl.warc.gz"}
	for _, n := range after {
		record(n)
	}
	testenv.Eventually(t, 10*time.Second, "two more registered and checkpointed", func() bool {
		return known(after...) && checkpointed() == last
	})
	restore := func() {
		t.Helper()
		if _, err := db.Exec(ctx, `DELETE FROM indexer.files WHERE name = ANY($1)`, after); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE indexer.checkpoints SET stream_seq = $1`, int64(backup)); err != nil {
			t.Fatal(err)
		}
	}
	restore()
	testenv.Eventually(t, 10*time.Second, "the running leader takes again what the restore lost", func() bool {
		return known(after...)
	})
	stopLeader()
	restore()
	stopLeader = lead()
	testenv.Eventually(t, 10*time.Second, "a new leadership takes again what the restore lost", func() bool {
		return known(after...)
	})
	if _, err := reg.Get(ctx, "objects/z/v1/producer/crawl.warc.gz"); err == nil {
		t.Error("a deleted file was registered by the replay of recordings")
	}
}
