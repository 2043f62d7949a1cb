package auditcmd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/testenv"
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
