package auditor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/blobtest"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestObjectWhoseCheckKeepsFailingIsParkedNotRequeued: a check that always
// fails was dead-lettered, requeued by the schedule 6 hours later (never
// checked since), dead-lettered again, for ever. Its third failure now parks
// the object with the reason; the schedule does not requeue it; the status
// counts it; a later successful check unparks it.
func TestObjectWhoseCheckKeepsFailingIsParkedNotRequeued(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := testenv.Bus(t, "auditor")
	a := auditor.New(b, db, bs, nil, auditor.Config{Cycle: 720 * time.Hour, RequeueAfter: time.Hour}, testenv.Logger(t))
	long := time.Now().Add(-2 * time.Hour)
	for _, o := range []string{"objects/cursed", "objects/lost"} {
		if _, err := db.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due, queued_for) VALUES ($1, now() + interval '30 days', $2)`, o, long); err != nil {
			t.Fatal(err)
		}
	}
	f := a.Failures()
	task := &events.AuditTask{Object: "objects/cursed", Reason: "scheduled"}
	for i := range 3 {
		n, err := f.Failed(ctx, "audit:objects/cursed:1", task, errors.New("checksum stream broke"))
		if err != nil || n != i+1 {
			t.Fatalf("failure %d counted as %d: %v", i+1, n, err)
		}
	}
	if err := f.Exhausted(ctx, "audit:objects/cursed:1", task, errors.New("checksum stream broke")); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Failures(ctx, "audit:objects/cursed:1"); n != 0 {
		t.Errorf("an exhausted task keeps %d failures", n)
	}
	n, err := a.Requeue(ctx, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("requeued %d (%v), want 1: the lost task, not the parked one", n, err)
	}
	var reason string
	db.QueryRow(ctx, `SELECT parked_reason FROM auditor.schedule WHERE object = 'objects/cursed'`).Scan(&reason)
	if !strings.Contains(reason, "failed 3 times") || !strings.Contains(reason, "checksum stream broke") {
		t.Errorf("parked reason %q", reason)
	}
	parked, err := a.Parked(ctx, 10)
	if err != nil || len(parked) != 1 || parked[0].Object != "objects/cursed" {
		t.Errorf("parked list %+v %v", parked, err)
	}
	for _, c := range []events.Consumer{events.AuditorHigh, events.AuditorLow} {
		if _, err := b.EnsureConsumer(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	st, err := a.Status(ctx)
	if err != nil || st.Parked != 1 {
		t.Errorf("status parked %d (%v), want 1", st.Parked, err)
	}
}

// TestAuditQueueIsProcessed: rows 7, 9 and 10 add objects to the audit
// queue, which nothing read. Processing it captures the provider's object
// (sha256, size) into the content index and the audit log, schedules it and
// queues a check to confirm; an object gone from the provider is marked so.
func TestAuditQueueIsProcessed(t *testing.T) {
	ctx := context.Background()
	a, db, b, info := queueAuditor(t, "objects/new", "added at the provider")
	if _, err := db.Exec(ctx, `INSERT INTO auditor.audit_queue (object, reason, row_no) VALUES
		('objects/new', 'added at the provider, not yet captured', 9), ('objects/gone', 'the audit record was lost', 7)`); err != nil {
		t.Fatal(err)
	}
	n, err := a.ProcessAuditQueue(ctx, 10)
	if err != nil || n != 2 {
		t.Fatalf("processed %d (%v), want 2", n, err)
	}
	var sum, action, source string
	db.QueryRow(ctx, `SELECT checksum FROM auditor.content_index WHERE object = 'objects/new'`).Scan(&sum)
	db.QueryRow(ctx, `SELECT action, source FROM auditor.audit_log WHERE object = 'objects/new'`).Scan(&action, &source)
	if sum != info.Checksum.Value || action != "add" || !strings.HasPrefix(source, "audit-queue:") {
		t.Errorf("captured: index %q (want %s), log %s from %s", sum, info.Checksum.Value, action, source)
	}
	outcomes := map[string]string{}
	rows, _ := db.Query(ctx, `SELECT object, outcome FROM auditor.audit_queue WHERE done`)
	for rows.Next() {
		var o, out string
		rows.Scan(&o, &out)
		outcomes[o] = out
	}
	rows.Close()
	if outcomes["objects/new"] != "captured" || outcomes["objects/gone"] != "gone" {
		t.Errorf("outcomes %v", outcomes)
	}
	var scheduled bool
	db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auditor.schedule WHERE object = 'objects/new')`).Scan(&scheduled)
	high, err := b.JetStream().Stream(ctx, events.StreamAuditHigh)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := high.Info(ctx); !scheduled || st.State.Msgs != 1 {
		t.Errorf("scheduled %v, %d checks queued: want the captured object scheduled and checked", scheduled, st.State.Msgs)
	}
	if n, _ := a.ProcessAuditQueue(ctx, 10); n != 0 {
		t.Errorf("processed %d more, want none", n)
	}
}

// TestCheckAfterCaptureStandsAlone: a check asked before an object was
// captured (an operator's, or the schedule's, waiting or retrying row 9
// while the capture runs) looked before the capture; the capture's own
// check is a task of its own, not dropped as its repeat. Both ids used to
// name the object's last check, so JetStream dropped the second, and the
// first recorded "not yet captured" for ever (the e2e soak at 0887fb1).
// Asked again, an operator's check is still one task, and an entry worked
// twice (a change of leader) queues its check once.
func TestCheckAfterCaptureStandsAlone(t *testing.T) {
	ctx := context.Background()
	a, db, b, _ := queueAuditor(t, "objects/new", "added at the provider")
	high, err := b.JetStream().Stream(ctx, events.StreamAuditHigh)
	if err != nil {
		t.Fatal(err)
	}
	queued := func(step string, want uint64) {
		t.Helper()
		st, err := high.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.State.Msgs != want {
			t.Errorf("%s: %d checks queued, want %d", step, st.State.Msgs, want)
		}
	}
	if _, err := a.CheckNow(ctx, "objects/new", "", false); err != nil {
		t.Fatal(err)
	}
	queued("an operator's check before the capture", 1)
	if _, err := db.Exec(ctx, `INSERT INTO auditor.audit_queue (object, reason, row_no)
		VALUES ('objects/new', 'added at the provider, not yet captured', 9)`); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ProcessAuditQueue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("processed %d (%v), want 1", n, err)
	}
	queued("the capture's check", 2)
	if _, err := a.CheckNow(ctx, "objects/new", "", false); err != nil {
		t.Fatal(err)
	}
	queued("the operator's check asked again", 2)
	if _, err := db.Exec(ctx, `UPDATE auditor.audit_queue SET done = false`); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ProcessAuditQueue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("worked again: processed %d (%v), want 1", n, err)
	}
	queued("the entry worked again", 2)
}

// TestAuditQueueEntryFailsAlone: an entry that cannot be captured (here a
// key no store accepts) used to stop the whole queue on every tick; it now
// backs off alone, with its error, and the entries after it are captured.
func TestAuditQueueEntryFailsAlone(t *testing.T) {
	ctx := context.Background()
	a, db, _, _ := queueAuditor(t, "objects/fine", "fine")
	if _, err := db.Exec(ctx, `INSERT INTO auditor.audit_queue (object, reason, row_no) VALUES
		('objects//broken', 'the audit record was lost', 7), ('objects/fine', 'added at the provider, not yet captured', 9)`); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the failing entry is not taken again while it backs off
		if _, err := a.ProcessAuditQueue(ctx, 10); err != nil {
			t.Fatalf("the queue stopped at the failing entry: %v", err)
		}
	}
	var outcome *string
	db.QueryRow(ctx, `SELECT outcome FROM auditor.audit_queue WHERE object = 'objects/fine'`).Scan(&outcome)
	if outcome == nil || *outcome != "captured" {
		t.Errorf("the entry after the failing one: outcome %v, want captured", outcome)
	}
	var failures int
	var lastError string
	var done, parked, later bool
	db.QueryRow(ctx, `SELECT failures, last_error, done, parked_at IS NOT NULL, next_attempt_at > now() FROM auditor.audit_queue
		WHERE object = 'objects//broken'`).Scan(&failures, &lastError, &done, &parked, &later)
	if failures != 1 || !strings.Contains(lastError, "empty") || done || parked || !later {
		t.Errorf("failing entry: %d failures, error %q, done %v, parked %v, backing off %v: want one failure, its error, backing off",
			failures, lastError, done, parked, later)
	}
	// An operator's check of the object is its retry: due again at once.
	if _, err := a.CheckNow(ctx, "objects//broken", "", false); err != nil {
		t.Fatal(err)
	}
	db.QueryRow(ctx, `SELECT failures, next_attempt_at > now() FROM auditor.audit_queue WHERE object = 'objects//broken'`).Scan(&failures, &later)
	if failures != 0 || later {
		t.Errorf("after the operator's check: %d failures, backing off %v; want it due again", failures, later)
	}
}

// TestAuditQueueNeverCapturesOverTheRecord: on the S3 stand-in, a 17 MiB
// object put without a stated sha256 rots; an audit-queue entry for it
// (what row 10 queued on its last attempt) used to hash the rotted bytes
// into the content index and the audit log, after which every audit
// passed. The entry now ends "disputed" with an externally resolvable
// task, and the record keeps the good checksum.
func TestAuditQueueNeverCapturesOverTheRecord(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	s3 := blobtest.NewS3(t, blobtest.S3Options{})
	bs := s3.Bucket(t, "archive", "")
	good := make([]byte, 17<<20)
	for i := range good {
		good[i] = byte(i % 251)
	}
	if _, err := bs.Put(ctx, "objects/rotted", bytes.NewReader(good), nil); err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(good)
	sum := hex.EncodeToString(d[:])
	for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
		`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
		if _, err := db.Exec(ctx, q, "objects/rotted", sum, len(good)); err != nil {
			t.Fatal(err)
		}
	}
	s3.Rot(t, "archive", "objects/rotted", func(b []byte) { b[999] ^= 1 })
	if _, err := db.Exec(ctx, `INSERT INTO auditor.audit_queue (object, reason, row_no) VALUES ('objects/rotted', 'updated at the provider, not yet captured', 10)`); err != nil {
		t.Fatal(err)
	}
	a := auditor.New(testenv.Bus(t, "auditor"), db, bs, nil, auditor.Config{Cycle: 720 * time.Hour, MaxOnDemand: 100}, testenv.Logger(t))
	if n, err := a.ProcessAuditQueue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("processed %d (%v), want 1", n, err)
	}
	var outcome, indexed string
	var logs, tasks int
	if err := db.QueryRow(ctx, `SELECT (SELECT outcome FROM auditor.audit_queue WHERE object = $1),
		(SELECT checksum FROM auditor.content_index WHERE object = $1),
		(SELECT count(*) FROM auditor.audit_log WHERE object = $1),
		(SELECT count(*) FROM auditor.resolution_tasks WHERE object = $1 AND kind = 'external' AND state = 'open')`, "objects/rotted").
		Scan(&outcome, &indexed, &logs, &tasks); err != nil {
		t.Fatal(err)
	}
	if outcome != "disputed" || indexed != sum || logs != 1 || tasks != 1 {
		t.Errorf("outcome %q (want disputed), content index %s (want %s), audit log entries %d (want 1), open external tasks %d (want 1)",
			outcome, indexed, sum, logs, tasks)
	}
}

// queueAuditor is an auditor over a database of its own and a local blob
// store holding one object, key (content), that no event recorded: what
// the audit-queue tests capture. It returns the object's blob info too.
func queueAuditor(t *testing.T, key, content string) (*auditor.Auditor, *pgxpool.Pool, *bus.Bus, blob.Info) {
	t.Helper()
	db := testenv.DB(t, migrations.Schema)
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	info, err := bs.Put(context.Background(), key, strings.NewReader(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := testenv.Bus(t, "auditor")
	return auditor.New(b, db, bs, nil, auditor.Config{Cycle: 720 * time.Hour, MaxOnDemand: 100}, testenv.Logger(t)), db, b, info
}
