package aggregator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/testenv"
	"github.com/archivist/archivist/services/aggregator/migrations"
)

// TestLateAnnouncementDoesNotReplaceANewerOutput: a file re-indexed (its
// second output announced) and then the first announcement redelivered
// late: the newer output stays; a replay of the newer one neither changes
// it nor makes it merge again.
func TestLateAnnouncementDoesNotReplaceANewerOutput(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	a := &Aggregator{db: db, log: slog.New(slog.NewTextHandler(io.Discard, nil)), wake: make(chan struct{}, 1), skipped: skippedCounter(nil)}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	announce := func(output string, lines int64, sent time.Time) {
		t.Helper()
		ev := &events.IndexCDXReady{File: "a.warc.gz", Output: output, Lines: lines, Complete: true}
		if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: output, SentAt: sent}, Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	current := func() (output string, received time.Time) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT output, received_at FROM aggregator.outputs WHERE file = 'a.warc.gz'`).Scan(&output, &received); err != nil {
			t.Fatal(err)
		}
		return output, received
	}
	announce("cdx/a.warc.gz/1.cdx", 5, at)
	announce("cdx/a.warc.gz/2.cdx", 6, at.Add(time.Minute))
	_, received := current()
	announce("cdx/a.warc.gz/1.cdx", 5, at) // the first, redelivered late
	if out, _ := current(); out != "cdx/a.warc.gz/2.cdx" {
		t.Errorf("output %s after a late announcement, want the newer cdx/a.warc.gz/2.cdx", out)
	}
	announce("cdx/a.warc.gz/2.cdx", 6, at.Add(time.Minute)) // a replay
	announce("cdx/a.warc.gz/2.cdx", 6, at.Add(time.Hour))   // the same output announced again
	if out, r := current(); out != "cdx/a.warc.gz/2.cdx" || !r.Equal(received) {
		t.Errorf("output %s received %s after replays, want it unchanged (received %s)", out, r, received)
	}
	if n := testutil.ToFloat64(a.skipped); n != 2 {
		t.Errorf("%v announcements counted as skipped, want 2 (the late one and the replay)", n)
	}
}

// TestReplacedGenerationsAreDeletedAfterAGrace: every build used to leave
// the generation it replaced in the blob store for ever. A replaced
// generation is retired with the swap and its object deleted once
// AGGREGATOR_RETIRE_AFTER has passed; the current ones are kept.
func TestReplacedGenerationsAreDeletedAfterAGrace(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var keys []string
	for i, file := range []string{"a.warc.gz", "b.warc.gz"} {
		out := "cdx/" + file + "/1.cdx"
		line := "com,example)/" + file + " 20260101000000 http://example.com/" + file + " text/html 200 AAAA - - 10 0 " + file + "\n"
		if _, err := bs.Put(ctx, out, strings.NewReader(line), nil); err != nil {
			t.Fatal(err)
		}
		ev := &events.IndexCDXReady{File: file, Output: out, Lines: 1, Complete: true}
		if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: out, SentAt: at.Add(time.Duration(i) * time.Minute)}, Event: ev}); err != nil {
			t.Fatal(err)
		}
		if err := a.MergeNew(ctx); err != nil {
			t.Fatal(err)
		}
		gens, err := a.Generations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, gens[1].Key) // recent
	}
	exists := func(k string) bool {
		_, err := bs.Stat(ctx, k)
		return err == nil
	}
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(keys[0]) {
		t.Fatalf("the replaced generation %s was deleted within its grace", keys[0])
	}
	a.cfg.RetireAfter = 0
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(keys[0]) || !exists(keys[1]) {
		t.Errorf("after the grace: replaced %s exists %v (want deleted), current %s exists %v (want kept)", keys[0], exists(keys[0]), keys[1], exists(keys[1]))
	}
	if gens, err := a.Generations(ctx); err != nil || gens[1].Lines != 2 || gens[1].Key != keys[1] {
		t.Errorf("generations after the deletion: %+v %v, want recent %s of 2 lines", gens, err, keys[1])
	}
}

// TestSupersededOutputsAreDeletedAfterAGrace: a re-indexed file's earlier
// output, and the output of an announcement that arrives after a newer
// one, were kept in the blob store for ever. Each is retired when it stops
// being the file's and deleted after AGGREGATOR_RETIRE_AFTER; the file's
// current output stays, and a build after the deletion has its lines.
func TestSupersededOutputsAreDeletedAfterAGrace(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	announce := func(attempt int, sent time.Time) string {
		t.Helper()
		out := fmt.Sprintf("cdx/a.warc.gz/%d.cdx", attempt)
		line := fmt.Sprintf("com,example)/a 20260101000000 http://example.com/a text/html 200 AAAA - - 10 %d a.warc.gz\n", attempt)
		if _, err := bs.Put(ctx, out, strings.NewReader(line), nil); err != nil {
			t.Fatal(err)
		}
		ev := &events.IndexCDXReady{File: "a.warc.gz", Output: out, Lines: 1, Complete: true}
		if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: out, SentAt: sent}, Event: ev}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := announce(1, at)
	second := announce(2, at.Add(time.Minute))
	late := announce(3, at) // written, but announced as older than the second
	exists := func(k string) bool {
		_, err := bs.Stat(ctx, k)
		return err == nil
	}
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(first) || !exists(late) {
		t.Fatal("superseded outputs deleted within their grace")
	}
	a.cfg.RetireAfter = 0
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(first) || exists(late) || !exists(second) {
		t.Errorf("after the grace: first %v, late %v (want both deleted), current %v (want kept)", exists(first), exists(late), exists(second))
	}
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	if gens, err := a.Generations(ctx); err != nil || gens[1].Lines != 1 {
		t.Errorf("a build after the deletion: %+v %v, want the current output's line", gens, err)
	}
}

// storeAggregator is an aggregator on a test database and a local blob
// store, generations retired after an hour.
func storeAggregator(t *testing.T) (*Aggregator, blob.Store) {
	t.Helper()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Aggregator{db: testenv.DB(t, migrations.Schema), blob: bs, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		wake: make(chan struct{}, 1), skipped: skippedCounter(nil),
		cfg: Config{MainThreshold: 1000, Prefix: "index/", RetireAfter: time.Hour, FanIn: 64}}, bs
}
