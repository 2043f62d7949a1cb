package withdraw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/archivist/archivist/services/curator/ingest/withdraw"
	"github.com/archivist/archivist/services/curator/migrations"
	"github.com/nats-io/nats.go/jetstream"
)

// TestWithdrawRefusesBadRequests: a withdrawal without a valid ARK, with
// a negative version or without a reason is refused, naming the field,
// before anything is read or written.
func TestWithdrawRefusesBadRequests(t *testing.T) {
	t.Parallel()
	w := &withdraw.Withdrawer{Log: slog.New(slog.DiscardHandler)}
	for _, c := range []struct {
		req   withdraw.Request
		field string
	}{
		{withdraw.Request{ARK: "not-an-ark", Reason: "x"}, "ark"},
		{withdraw.Request{ARK: "ark:/99999/fk4w1", Version: -1, Reason: "x"}, "version"},
		{withdraw.Request{ARK: "ark:/99999/fk4w1", Reason: "  "}, "reason"},
		{withdraw.Request{ARK: "ark:/99999/fk4w1", Reason: strings.Repeat("x", 2001)}, "reason"},
	} {
		_, err := w.Withdraw(context.Background(), c.req)
		var inv *ingest.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%+v: %v; want an invalid %s", c.req, err, c.field)
		}
	}
}

// TestTheRegisterOutlivesARestore: a database restored to before an
// object was deposited and taken down learns the takedown again from the
// register in the store: the version's files are deleted and their
// deletion announced, the identifier is bound to its depositor again and
// the object kept as a tombstone, so that a deposit into it is refused. A
// second pass has nothing to do.
func TestTheRegisterOutlivesARestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.Connect(ctx, bus.Config{URL: testenv.NATS(t), Replicas: 1, EnsureStreams: true}, "curator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(ctx) })
	if err := b.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	w := &withdraw.Withdrawer{DB: db, Blob: bs, Bus: b, Log: slog.New(slog.DiscardHandler)}

	const a = "ark:/99999/fk4restored"
	files := []string{inventory.Key(a, 1, "producer/a.txt"), inventory.Key(a, 1, "system/mrt-manifest.checkm")}
	for _, k := range files {
		if _, err := bs.Put(ctx, k, bytes.NewReader([]byte(k)), nil); err != nil {
			t.Fatal(err)
		}
	}
	entry, err := json.Marshal(withdraw.Takedown{ARK: a, Version: 1, Object: true, At: time.Now().Add(-time.Hour), Reason: "a court order",
		Submitter: "alice", Profile: "p", LocalID: "L1", Title: "taken down", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	key := withdraw.RegisterPrefix + strings.TrimPrefix(inventory.Prefix(a), "objects/") + "v1.json"
	if _, err := bs.Put(ctx, key, bytes.NewReader(entry), nil); err != nil {
		t.Fatal(err)
	}

	r, err := w.Replay(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.Read != 1 || r.Applied != 1 || !r.PassDone {
		t.Errorf("replay: %+v; want one entry read and applied, the pass done", r)
	}
	for _, k := range files {
		if _, _, err := bs.Get(ctx, k); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s is still in the store (%v)", k, err)
		}
	}
	name, err := b.JetStream().StreamNameBySubject(ctx, events.SubjectObjectDeleted)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream().Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.SubjectObjectDeleted))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[events.SubjectObjectDeleted]; n != uint64(len(files)) {
		t.Errorf("%d deletions announced, want %d", n, len(files))
	}
	var submitter, reason string
	if err := db.QueryRow(ctx, `SELECT a.submitter, o.withdrawn_reason FROM curator.arks a JOIN curator.inventory_objects o USING (ark)
		WHERE a.ark = $1 AND o.withdrawn_at IS NOT NULL`, a).Scan(&submitter, &reason); err != nil {
		t.Fatalf("the object is not kept as a withdrawn tombstone: %v", err)
	}
	if submitter != "alice" || reason != "a court order" {
		t.Errorf("tombstone bound to %q, withdrawn for %q; want alice and the register's reason", submitter, reason)
	}

	// A deposit into it is refused; a second pass applies nothing.
	batch := ingesttest.NewBatch(t, db, ingesttest.Batch{Submitter: "alice"})
	job := ingesttest.NewJob(t, db, ingesttest.Job{Batch: batch, State: "storing", ARK: a})
	var wd *inventory.WithdrawnError
	if _, err := inventory.Hold(ctx, db, bs, &ingest.JobRow{ID: job, ARK: a}); !errors.As(err, &wd) {
		t.Errorf("a deposit into the object taken down: %v; want refused as withdrawn", err)
	}
	if r, err := w.Replay(ctx, 100); err != nil || r.Applied != 0 {
		t.Errorf("the second pass: %+v, %v; want nothing applied", r, err)
	}
}
