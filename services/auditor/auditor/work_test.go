package auditor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestParkedAuditWorkIsFoundAndRetried: a parked request of the audit
// queue, a parked repair and a parked check are one filter's items; a
// retry of what the dry run counted unparks them and checks the objects
// now, and each object's history names the action.
func TestParkedAuditWorkIsFoundAndRetried(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := auditor.New(testenv.Bus(t, "auditor"), db, bs, nil, auditor.Config{Cycle: 720 * time.Hour, RequeueAfter: time.Hour}, testenv.Logger(t))
	for _, sql := range []string{
		`INSERT INTO auditor.audit_queue (object, reason, row_no, failures, last_error, parked_at) VALUES ('objects/a', 'row 7', 7, 5, 'read: connection reset', now())`,
		`INSERT INTO auditor.audit_queue (object, reason, row_no, done, done_at) VALUES ('objects/b', 'row 9', 9, true, now())`,
		`INSERT INTO auditor.resolution_tasks (object, kind, reason, row_no, repair_failures, repair_error, repair_parked_at)
			VALUES ('objects/c', 'internal', 'rot: content differs', 2, 5, 'copy: access denied', now())`,
		`INSERT INTO auditor.schedule (object, next_due) VALUES ('objects/a', now() + interval '30 days'), ('objects/c', now() + interval '30 days')`,
		`INSERT INTO auditor.schedule (object, next_due, parked_at, parked_reason) VALUES ('objects/d', now() + interval '30 days', now(), 'check failed 3 times: checksum stream broke')`,
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	ws := a.Work()
	parked := work.Filter{Pipeline: "audit", States: []string{"parked"}}
	p, err := ws.Find(ctx, parked, "", 50)
	if err != nil || len(p.Items) != 3 {
		t.Fatalf("parked audit work: %+v, %v", p.Items, err)
	}
	kinds := map[string]string{}
	for _, it := range p.Items {
		kinds[it.Kind] = it.Reason
	}
	if kinds["request"] != "read: connection reset" || kinds["repair"] != "copy: access denied" || !strings.Contains(kinds["check"], "checksum stream broke") {
		t.Fatalf("reasons %v", kinds)
	}
	c, err := ws.DryRun(ctx, work.Retry, parked)
	if err != nil || c.N != 3 {
		t.Fatalf("dry run %+v, %v", c, err)
	}
	act, err := ws.Act(ctx, work.Retry, parked, 3, "ops")
	if err != nil || act.Moved != 3 {
		t.Fatalf("retry %+v, %v", act, err)
	}
	if p, _ := ws.Find(ctx, parked, "", 50); len(p.Items) != 0 {
		t.Fatalf("still parked: %+v", p.Items)
	}
	for _, o := range []string{"objects/a", "objects/c", "objects/d"} {
		h, err := a.History(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range h.Events {
			found = found || (e.What == "retry" && strings.HasSuffix(e.Detail, fmt.Sprintf("work action %d by ops", act.ID)))
		}
		if !found {
			t.Errorf("%s's history has no retry: %+v", o, h.Events)
		}
	}
}
