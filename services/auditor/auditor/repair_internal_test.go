package auditor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// readCounter counts the objects read from a store.
type readCounter struct {
	blob.Store
	gets atomic.Int64
}

func (c *readCounter) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

// TestRepairsEnd: automatic repair pages past tasks it cannot repair. With
// 20 tasks, the 16 lowest of whose second copies have gone sour too and a
// 17th whose content index row is gone (a withdrawal), each failed repair
// is recorded on its task (the first kind backing off, the second parked
// at once with its reason), and the three after them are repaired on the
// same ticks; the unrepairable ones are not read again before their
// backoff ends. (Every minute the same 16 lowest tasks were tried again,
// re-reading their whole second copies, and no later task was ever
// repaired.)
func TestRepairsEnd(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	primary, _ := blob.NewLocal(t.TempDir())
	local, _ := blob.NewLocal(t.TempDir())
	secondary := &readCounter{Store: local}
	a := New(testenv.Bus(t, "auditor"), db, primary, secondary, Config{Cycle: time.Hour, MaxOnDemand: 100, AutoRepair: []string{"objects/"}}, testenv.Logger(t))
	sum := func(s string) string { d := sha256.Sum256([]byte(s)); return hex.EncodeToString(d[:]) }
	for i := range 20 {
		key := fmt.Sprintf("objects/o%02d", i)
		good := "content of " + key
		second := good
		if i < 16 {
			second = strings.ToUpper(good) // sour in the second copy too
		}
		if _, err := primary.Put(ctx, key, strings.NewReader("ROT"+good), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := local.Put(ctx, key, strings.NewReader(second), nil); err != nil {
			t.Fatal(err)
		}
		if i != 16 { // o16 was withdrawn: no record left
			if _, err := db.Exec(ctx, `INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`, key, sum(good), len(good)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(ctx, `INSERT INTO auditor.resolution_tasks (object, kind, reason, row_no) VALUES ($1, 'internal', 'content went sour', 2)`, key); err != nil {
			t.Fatal(err)
		}
	}
	count := func(q string) (n int) {
		t.Helper()
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		a.autoRepair(ctx)
	}
	if n := count(`SELECT count(*) FROM auditor.resolution_tasks WHERE state = 'closed'`); n != 3 {
		t.Errorf("%d tasks repaired, want the 3 repairable ones", n)
	}
	if n := count(`SELECT count(*) FROM auditor.resolution_tasks WHERE state = 'open' AND repair_failures = 1 AND repair_next_at > now() AND repair_parked_at IS NULL`); n != 16 {
		t.Errorf("%d tasks backing off after one failed repair, want 16", n)
	}
	var reason string
	db.QueryRow(ctx, `SELECT repair_error FROM auditor.resolution_tasks WHERE object = 'objects/o16' AND repair_parked_at IS NOT NULL`).Scan(&reason)
	if !strings.Contains(reason, "no checksum") {
		t.Errorf("the withdrawn object's task: %q, want it parked saying why", reason)
	}
	if got := secondary.gets.Load(); got != 16+3 {
		t.Errorf("the second copy was read %d times over 3 ticks, want 19 (each unrepairable task once)", got)
	}
	for i := range 3 {
		key := fmt.Sprintf("objects/o%02d", 17+i)
		rc, _, err := primary.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 64)
		n, _ := rc.Read(b)
		rc.Close()
		if string(b[:n]) != "content of "+key {
			t.Errorf("%s after the repair: %q", key, b[:n])
		}
	}
}
