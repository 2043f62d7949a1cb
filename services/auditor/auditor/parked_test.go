package auditor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/testenv"
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
