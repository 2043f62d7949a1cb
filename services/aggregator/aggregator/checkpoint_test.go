package aggregator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/checkpoint"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// TestAnnouncementsARestoreLostAreTakenAgain: the database restored to a
// backup (its rows and its checkpoint as they were) while the bus kept
// going: the leader sees its checkpoint go back and takes the
// announcements since again, and a new leadership does so from the
// checkpoint it finds; a file withdrawn before the backup stays out.
// Before the checkpoint, an announcement recorded after the backup was
// never delivered again and its file never answered (TestArchiveModel).
func TestAnnouncementsARestoreLostAreTakenAgain(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	b := testenv.Bus(t, "indexer")
	sub, err := bus.Consume(ctx, b, events.AggregatorReady, a.Ready)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	lead := func() (stop func()) {
		return testenv.Go(t, a.Checkpoint(b, sub, checkpoint.WithInterval(20*time.Millisecond)).Run)
	}
	stopLeader := lead()

	var last uint64
	publish := func(files ...string) {
		for _, f := range files {
			out := "cdx/" + f + "/1.cdx"
			if _, err := bs.Put(ctx, out, strings.NewReader(fmt.Sprintf("com,example,%s)/ 20260101000000 http://%s.example.com/ text/html 200 X - - 10 0 %s\n", f, f, f)), nil); err != nil {
				t.Fatal(err)
			}
			_, ack, err := b.PublishEvent(ctx, &events.IndexCDXReady{File: f, Output: out, Lines: 1, Complete: true})
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
	}
	checkpoint := func() uint64 {
		var s int64
		if err := a.db.QueryRow(ctx, `SELECT coalesce((SELECT stream_seq FROM aggregator.checkpoints WHERE consumer = 'aggregator-ready'), 0)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return uint64(s)
	}
	recorded := func() map[string]bool {
		rows, err := a.db.Query(ctx, `SELECT file, withdrawn FROM aggregator.outputs`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]bool{}
		for rows.Next() {
			var f string
			var w bool
			if err := rows.Scan(&f, &w); err != nil {
				t.Fatal(err)
			}
			m[f] = !w
		}
		return m
	}
	settled := func(what string, files int) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, what, func() bool { return len(recorded()) == files && checkpoint() == last })
	}

	publish("f0", "f1", "f2")
	settled("three announcements recorded and checkpointed", 3)
	if _, err := a.Withdraw(ctx, "f1", "a takedown before the backup"); err != nil {
		t.Fatal(err)
	}
	backup := checkpoint()

	// After the backup: three more, recorded; then the database is
	// restored under the running leader.
	publish("f3", "f4", "f5")
	settled("three more recorded and checkpointed", 6)
	restore := func() {
		t.Helper()
		if _, err := a.db.Exec(ctx, `DELETE FROM aggregator.outputs WHERE file IN ('f3', 'f4', 'f5');
			UPDATE aggregator.checkpoints SET stream_seq = `+fmt.Sprint(backup)); err != nil {
			t.Fatal(err)
		}
	}
	restore()
	testenv.Eventually(t, 10*time.Second, "the running leader takes again what the restore lost", func() bool {
		r := recorded()
		return r["f3"] && r["f4"] && r["f5"] && checkpoint() == last
	})

	// A restore while no leader runs: the next leadership takes them again.
	stopLeader()
	restore()
	stopLeader = lead()
	testenv.Eventually(t, 10*time.Second, "a new leadership takes again what the restore lost", func() bool {
		r := recorded()
		return r["f3"] && r["f4"] && r["f5"]
	})
	if r := recorded(); !r["f0"] || r["f1"] || !r["f2"] {
		t.Errorf("recorded %v: want f0 and f2 live, f1 withdrawn still", r)
	}

	// The files are answered; the withdrawn one is not.
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"f0", "f2", "f3", "f4", "f5", "f1"} {
		lines, err := a.Lookup(ctx, cdxindex.Query{Key: "com,example," + f + ")/"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(lines), map[bool]int{true: 0, false: 1}[f == "f1"]; got != want {
			t.Errorf("%s answers %d lines, want %d", f, got, want)
		}
	}
}
