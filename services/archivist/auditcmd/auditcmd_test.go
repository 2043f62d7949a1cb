package auditcmd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/archivist/auditcmd"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestAuditCheckAndStatus: `archivist audit check` queues a high-priority
// check of an object the auditor never heard of (row 9: present at the
// provider, not captured), and `archivist audit status` shows the queue.
func TestAuditCheckAndStatus(t *testing.T) {
	ctx := context.Background()
	bs, _ := blob.NewLocal(t.TempDir())
	bs.Put(ctx, "space/a", strings.NewReader("a"), nil)
	port := testenv.FreePort(t)
	testenv.StartServiceIn(t, auditor.Definition(), testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs},
		map[string]string{"AUDITOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "AUDITOR_RETRY_DELAY": "1h"})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	n, err := auditcmd.Check(ctx, base, "", "space/", false)
	if err != nil || n != 1 {
		t.Fatalf("check: %d %v", n, err)
	}
	if _, err := auditcmd.Check(ctx, base, "../x", "", false); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("bad key: %v", err)
	}
	// Row 9 on its first attempt: retry later, so the task waits in the
	// high queue (redelivery in an hour).
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := auditcmd.Status(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if st.QueuedHigh == 1 {
			var out strings.Builder
			auditcmd.Print(&out, st)
			if !strings.Contains(out.String(), "high 1") {
				t.Errorf("printed status:\n%s", out.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the queued check: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestParkedAndResolutionViews: `archivist audit parked` lists the objects
// whose check failed three times with the reason, `archivist audit
// resolutions` the open resolution tasks, and `archivist audit close ID`
// closes one (then listed only with --all).
func TestParkedAndResolutionViews(t *testing.T) {
	ctx := context.Background()
	bs, _ := blob.NewLocal(t.TempDir())
	port := testenv.FreePort(t)
	dbURL := testenv.DBURL(t, migrations.Schema)
	testenv.StartServiceIn(t, auditor.Definition(), testenv.Shared{NATSURL: testenv.NATS(t), DBURL: dbURL, Blob: bs},
		map[string]string{"AUDITOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port)})
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due, parked_at, parked_reason)
		VALUES ('objects/cursed', now() + interval '30 days', now(), 'check failed 3 times (scheduled task): stream broke');
		INSERT INTO auditor.resolution_tasks (object, kind, reason, row_no) VALUES ('objects/sour', 'external', 'the content went sour', 2)`); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := auditcmd.Parked(ctx, base)
	var out strings.Builder
	auditcmd.PrintParked(&out, p)
	if err != nil || len(p) != 1 || !strings.Contains(out.String(), "objects/cursed") || !strings.Contains(out.String(), "stream broke") {
		t.Errorf("parked: %v\n%s", err, out.String())
	}
	res, err := auditcmd.Resolutions(ctx, base, false)
	if err != nil || len(res) != 1 || res[0].Object != "objects/sour" {
		t.Fatalf("resolutions: %+v %v", res, err)
	}
	if err := auditcmd.Close(ctx, base, res[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := auditcmd.Close(ctx, base, res[0].ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("closing a closed task: %v, want a 404", err)
	}
	if open, _ := auditcmd.Resolutions(ctx, base, false); len(open) != 0 {
		t.Errorf("open after the close: %+v", open)
	}
	all, _ := auditcmd.Resolutions(ctx, base, true)
	out.Reset()
	auditcmd.PrintResolutions(&out, all)
	if len(all) != 1 || all[0].State != "closed" || !strings.Contains(out.String(), "closed") {
		t.Errorf("--all: %+v\n%s", all, out.String())
	}
}
