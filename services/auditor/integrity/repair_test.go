package integrity_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/integrity"
)

// TestRepairFromTheSecondaryStore: content gone sour (row 2) that the
// secondary store holds whole is copied back, the repair goes into the
// audit log and closes the task, and the next check is row 1; a secondary
// copy gone sour too is refused and changes nothing; an external task is
// not repairable.
func TestRepairFromTheSecondaryStore(t *testing.T) {
	ctx := context.Background()
	secondary, _ := blob.NewLocal(t.TempDir())
	secondary.Put(ctx, obj, strings.NewReader("content"), nil)
	e := setup(t, secondary)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	e.log(sum("content"), nil)
	e.rot("CONTENT")
	res, err := e.check(false, 1)
	e.mustRow(res, err, 2)
	var task int64
	e.db.QueryRow(ctx, `SELECT id FROM auditor.resolution_tasks WHERE kind = 'internal' AND state = 'open'`).Scan(&task)

	// The secondary copy soured too: refused, nothing written.
	secondary.Put(ctx, obj, strings.NewReader("c0ntent"), nil)
	if _, err := e.chk.Repair(ctx, task); err == nil || !strings.Contains(err.Error(), "not what the content index says either") {
		t.Errorf("a sour secondary copy: %v", err)
	}
	if e.count(`SELECT count(*) FROM auditor.resolution_tasks WHERE id = $1 AND state = 'open'`, task) != 1 {
		t.Error("a failed repair closed its task")
	}

	secondary.Put(ctx, obj, strings.NewReader("content"), nil)
	rep, err := e.chk.Repair(ctx, task)
	if err != nil || rep.Row != 2 || rep.Object != obj {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	rc, _, err := e.store.Get(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "content" {
		t.Errorf("the primary store holds %q after the repair", got)
	}
	if e.count(`SELECT count(*) FROM auditor.audit_log WHERE object = $1 AND source LIKE 'repair:task-%'`, obj) != 1 ||
		e.count(`SELECT count(*) FROM auditor.resolution_tasks WHERE id = $1 AND state = 'closed'`, task) != 1 {
		t.Error("the repair is not in the audit log, or its task is open")
	}
	res, err = e.check(false, 1)
	e.mustRow(res, err, 1)
	if _, err := e.chk.Repair(ctx, task); !errors.Is(err, integrity.ErrNotRepairable) {
		t.Errorf("a closed task repaired again: %v", err)
	}

	// Without a secondary copy the task is external: not repairable here.
	e2 := setup(t, nil)
	e2.put("content", nil)
	e2.index(ptr(sum("content")))
	e2.log(sum("content"), nil)
	e2.rot("CONTENT")
	res, err = e2.check(false, 1)
	e2.mustRow(res, err, 2)
	var ext int64
	e2.db.QueryRow(ctx, `SELECT id FROM auditor.resolution_tasks WHERE kind = 'external'`).Scan(&ext)
	if _, err := e2.chk.Repair(ctx, ext); !errors.Is(err, integrity.ErrNotRepairable) {
		t.Errorf("an external task: %v", err)
	}
}

// TestAWithdrawnObjectIsRow11: an object recorded, checked (row 1), then
// withdrawn (deleted from the store, archive.object.deleted taken) is row
// 11 at its next check: nothing done, nothing logged as a failure.
func TestAWithdrawnObjectIsRow11(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	rec := integrity.NewRecords(e.db, time.Hour, testenv.Logger(t))
	e.put("content", nil)
	if err := rec.Recorded(ctx, "recorded:1", &events.ObjectRecorded{Object: obj, SHA256: sum("content"), Size: 7}); err != nil {
		t.Fatal(err)
	}
	res, err := e.check(false, 1)
	e.mustRow(res, err, 1)
	if err := e.store.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if err := rec.Deleted(ctx, "deleted:"+obj, &events.ObjectDeleted{Object: obj}); err != nil {
		t.Fatal(err)
	}
	res, err = e.check(false, 1)
	e.mustRow(res, err, 11)
	if e.resolutions("internal")+e.resolutions("external") != 0 || e.audits() != 0 {
		t.Error("row 11 did something")
	}
}

// TestAVersionAnnouncedWithOtherBytesIsNotRecorded: an announcement of a
// stored version's key with other bytes than those recorded (a deposit
// whose keys collided with another's, as they could before #47) changes
// neither the content index nor the audit log: the version's record stays
// as it was, and its check, due at once, says what the store holds.
func TestAVersionAnnouncedWithOtherBytesIsNotRecorded(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	rec := integrity.NewRecords(e.db, time.Hour, testenv.Logger(t))
	const version = "objects/ark:99999%2Ffk4x/v1/producer/page.txt"
	if err := rec.Recorded(ctx, "recorded:a", &events.ObjectRecorded{Object: version, SHA256: sum("alice's"), Size: 7}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Recorded(ctx, "recorded:b", &events.ObjectRecorded{Object: version, SHA256: sum("mallory's"), Size: 9, Update: true}); err != nil {
		t.Fatal(err)
	}
	var idx string
	var logs int
	var due bool
	e.db.QueryRow(ctx, `SELECT checksum FROM auditor.content_index WHERE object = $1`, version).Scan(&idx)
	e.db.QueryRow(ctx, `SELECT count(*) FROM auditor.audit_log WHERE object = $1`, version).Scan(&logs)
	e.db.QueryRow(ctx, `SELECT next_due <= now() FROM auditor.schedule WHERE object = $1`, version).Scan(&due)
	if idx != sum("alice's") || logs != 1 || !due {
		t.Errorf("index %s (want alice's), %d audit log items (want 1), due now %t", idx, logs, due)
	}
}
