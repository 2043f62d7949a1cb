package replica_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/auditor/migrations"
	"github.com/archivist/archivist/services/auditor/replica"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bundle is a replicator between two local stores over a fresh database.
type bundle struct {
	db                       *pgxpool.Pool
	primary, secondary       *blob.Local
	primaryDir, secondaryDir string
	r                        *replica.Replicator
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{db: testenv.DB(t, migrations.Schema), primaryDir: t.TempDir(), secondaryDir: t.TempDir()}
	var err error
	if b.primary, err = blob.NewLocal(b.primaryDir); err != nil {
		t.Fatal(err)
	}
	if b.secondary, err = blob.NewLocal(b.secondaryDir); err != nil {
		t.Fatal(err)
	}
	b.r = replica.New(b.db, b.primary, b.secondary, nil, slog.New(slog.DiscardHandler))
	return b
}

func sum(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

// put stores body at key in the primary and returns its recorded event.
func (b *bundle) put(t *testing.T, key string, body []byte) *bus.Message[events.ObjectRecorded] {
	t.Helper()
	if _, err := b.primary.Put(context.Background(), key, bytes.NewReader(body), nil); err != nil {
		t.Fatal(err)
	}
	return &bus.Message[events.ObjectRecorded]{Envelope: events.Envelope{SentAt: time.Now()},
		Event: &events.ObjectRecorded{Object: key, SHA256: sum(body), Size: int64(len(body))}}
}

func (b *bundle) secondHolds(t *testing.T, key string) []byte {
	t.Helper()
	rc, _, err := b.secondary.Get(context.Background(), key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestTheSecondCopyFollowsRecordsAndDeletions: a recorded object is
// copied (once: again it is present); a deletion removes it and a copy
// delivered late after it is not written back; bytes in the primary that
// are not the recorded ones are not copied.
func TestTheSecondCopyFollowsRecordsAndDeletions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	rec := b.put(t, "objects/a/v1/producer/a.txt", []byte("alpha"))
	for range 2 {
		if err := b.r.Recorded(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.secondHolds(t, rec.Event.Object); string(got) != "alpha" {
		t.Fatalf("the second copy holds %q, want alpha", got)
	}

	del := &bus.Message[events.ObjectDeleted]{Envelope: events.Envelope{SentAt: time.Now()}, Event: &events.ObjectDeleted{Object: rec.Event.Object}}
	if err := b.r.Deleted(ctx, del); err != nil {
		t.Fatal(err)
	}
	if got := b.secondHolds(t, rec.Event.Object); got != nil {
		t.Errorf("deleted, the second copy still holds %q", got)
	}
	// The record's message again, delivered late (sent before the deletion).
	if err := b.r.Recorded(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got := b.secondHolds(t, rec.Event.Object); got != nil {
		t.Errorf("a late copy wrote a deleted object back: %q", got)
	}

	// The primary holds other bytes than were recorded: not copied.
	bad := b.put(t, "objects/b/v1/producer/b.txt", []byte("beta"))
	bad.Event.SHA256 = sum([]byte("what was recorded"))
	if err := b.r.Recorded(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if got := b.secondHolds(t, bad.Event.Object); got != nil {
		t.Errorf("bytes other than the recorded ones were copied: %q", got)
	}
}

// TestTheSecondCopysAuditRepairsFromThePrimary: one pass over the content
// index copies back a file the second copy lost and one that rotted (from
// the primary, checked on the way), leaves a deleted one deleted, and says
// "both bad" where the primary's bytes are not the index's either.
func TestTheSecondCopysAuditRepairsFromThePrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	files := map[string][]byte{
		"objects/ok/v1/x": []byte("fine"), "objects/lost/v1/x": []byte("lost"), "objects/rot/v1/x": []byte("rotted"),
		"objects/gone/v1/x": []byte("withdrawn"), "objects/both/v1/x": []byte("both"),
	}
	for k, body := range files {
		rec := b.put(t, k, body)
		if err := b.r.Recorded(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.Exec(ctx, `INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`, k, sum(body), len(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due) VALUES ($1, now())`, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.secondary.Delete(ctx, "objects/lost/v1/x"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.secondaryDir, "objects/rot/v1/x"), []byte("rotteD"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.r.Deleted(ctx, &bus.Message[events.ObjectDeleted]{Envelope: events.Envelope{SentAt: time.Now()}, Event: &events.ObjectDeleted{Object: "objects/gone/v1/x"}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"objects/both/v1/x"} {
		for _, dir := range []string{b.primaryDir, b.secondaryDir} {
			if err := os.WriteFile(filepath.Join(dir, k), []byte("BOTH"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	a := &replica.Auditor{Replicator: b.r, Cycle: time.Hour, Mode: replica.ReadCheck}
	if n, err := a.Step(ctx, time.Hour); err != nil || n != len(files) {
		t.Fatalf("one step over a cycle: %d checked, %v; want all %d", n, err, len(files))
	}
	for _, k := range []string{"objects/ok/v1/x", "objects/lost/v1/x", "objects/rot/v1/x"} {
		if got := b.secondHolds(t, k); !bytes.Equal(got, files[k]) {
			t.Errorf("%s: the second copy holds %q after its audit, want %q", k, got, files[k])
		}
	}
	if got := b.secondHolds(t, "objects/gone/v1/x"); got != nil {
		t.Errorf("the audit wrote a deleted object back: %q", got)
	}
	outcomes := map[string]string{}
	rows, err := b.db.Query(ctx, `SELECT object, outcome FROM auditor.copy_log`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o, out string
		if err := rows.Scan(&o, &out); err != nil {
			t.Fatal(err)
		}
		outcomes[o] = out
	}
	want := map[string]string{"objects/ok/v1/x": "held", "objects/lost/v1/x": "missing: copied back from the primary",
		"objects/rot/v1/x": "sour: copied back from the primary", "objects/both/v1/x": "both bad"}
	for k, w := range want {
		if outcomes[k] != w {
			t.Errorf("%s: logged %q, want %q", k, outcomes[k], w)
		}
	}
	// A page as long as what was left: the next step finds the end.
	if n, err := a.Step(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("the step after the last object: %d checked, %v", n, err)
	}
	p, err := replica.ReadProgress(ctx, b.db, time.Hour)
	if err != nil || p == nil || p.Passes != 1 || p.Checked != 0 || p.Repaired != 2 {
		t.Errorf("progress: %+v, %v; want one pass ended, the next at its start, two files copied back", p, err)
	}
}
