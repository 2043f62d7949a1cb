package checkpoint_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/checkpoint"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestAFirstStartTakesNothingAgain: a database without a checkpoint (new,
// or made before checkpoints) starts from the consumer's ack floor, taking
// nothing again; a later start with the checkpoint set back takes again
// exactly the events after it, in order.
func TestAFirstStartTakesNothingAgain(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t)
	if _, err := db.Exec(ctx, `CREATE SCHEMA svc; CREATE TABLE svc.checkpoints (consumer text PRIMARY KEY,
		stream_seq bigint NOT NULL CHECK (stream_seq >= 0), at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	b := testenv.Bus(t, "indexer")
	var handled atomic.Int64
	var order []string
	h := func(_ context.Context, m *bus.Message[events.IndexCDXReady]) error {
		handled.Add(1)
		order = append(order, m.Event.File)
		return nil
	}
	sub, err := bus.Consume(ctx, b, events.AggregatorReady, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	var seqs []uint64
	for _, f := range []string{"a", "b", "c", "d"} {
		_, ack, err := b.PublishEvent(ctx, &events.IndexCDXReady{File: f, Output: "cdx/" + f, Lines: 1})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	testenv.Eventually(t, 10*time.Second, "four events handled", func() bool { return handled.Load() == 4 })
	stored := func() int64 {
		var s int64
		if err := db.QueryRow(ctx, `SELECT coalesce((SELECT stream_seq FROM svc.checkpoints WHERE consumer = 'aggregator-ready'), -1)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func() (stop func()) {
		return testenv.Go(t, checkpoint.For(db, "svc.checkpoints", b, sub, events.AggregatorReady, h, checkpoint.WithInterval(20*time.Millisecond)).Run)
	}
	stop := run()
	testenv.Eventually(t, 10*time.Second, "the checkpoint at the ack floor", func() bool { return stored() == int64(seqs[3]) })
	stop()
	if n := handled.Load(); n != 4 {
		t.Errorf("a first start handled %d events again, want none", n-4)
	}

	order = nil
	if _, err := db.Exec(ctx, `UPDATE svc.checkpoints SET stream_seq = $1`, int64(seqs[1])); err != nil {
		t.Fatal(err)
	}
	stop = run()
	testenv.Eventually(t, 10*time.Second, "the events after the checkpoint handled again, and the checkpoint at the floor", func() bool {
		return handled.Load() == 6 && stored() == int64(seqs[3])
	})
	stop()
	if handled.Load() != 6 || len(order) != 2 || order[0] != "c" || order[1] != "d" {
		t.Errorf("handled again %v, want [c d]", order)
	}
}
