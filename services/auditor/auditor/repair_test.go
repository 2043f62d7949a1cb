package auditor_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestRepairs: with a secondary store, content gone sour is an internally
// resolvable task; under AUDITOR_AUTO_REPAIR's prefixes it is repaired at
// once (copied back, logged, closed, checked again: row 1); elsewhere it
// waits for an operator's POST .../repair, which does the same; a task
// not internally resolvable is a 409.
func TestRepairs(t *testing.T) {
	ctx := context.Background()
	primaryDir, secondaryDir := t.TempDir(), t.TempDir()
	bs, _ := blob.NewLocal(primaryDir)
	secondary, _ := blob.NewLocal(secondaryDir)
	port := testenv.FreePort(t)
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	testenv.StartServiceIn(t, auditor.Definition(), sh, map[string]string{
		"AUDITOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "AUDITOR_CYCLE": "1h", "AUDITOR_SCHEDULE_TICK": "100ms",
		"AUDITOR_IDLE_BACKOFF_MIN": "50ms", "AUDITOR_IDLE_BACKOFF_MAX": "200ms", "AUDITOR_RETRY_DELAY": "100ms",
		"AUDITOR_SECONDARY_BLOB_URL": "file://" + secondaryDir, "AUDITOR_AUTO_REPAIR": "objects/auto/",
	})
	b := testenv.BusAt(t, sh.NATSURL, "ingest")
	var batch []bus.Outgoing
	for _, key := range []string{"objects/auto/a", "objects/manual/b"} {
		for _, s := range []blob.Store{bs, secondary} {
			if _, err := s.Put(ctx, key, strings.NewReader("content of "+key), nil); err != nil {
				t.Fatal(err)
			}
		}
		env, _ := events.New("ingest", &events.ObjectRecorded{Object: key, SHA256: sum("content of " + key), Size: int64(len("content of " + key))})
		batch = append(batch, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	if err := b.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string, args ...any) (n int) { db.QueryRow(ctx, q, args...).Scan(&n); return }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, cond)
	}
	waitFor("both recorded", func() bool { return count(`SELECT count(*) FROM auditor.content_index`) == 2 })
	for _, key := range []string{"objects/auto/a", "objects/manual/b"} {
		p := filepath.Join(primaryDir, key)
		fi, _ := os.Stat(p)
		os.WriteFile(p, []byte(strings.ToUpper("content of "+key)), 0o644)
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
	}
	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d%s", port, path), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/audit/check", `{"space": "objects/"}`); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("check: %d", code)
	}
	waitFor("the automatic repair", func() bool {
		return count(`SELECT count(*) FROM auditor.resolution_tasks WHERE object = 'objects/auto/a' AND kind = 'internal' AND state = 'closed'`) == 1 &&
			count(`SELECT count(*) FROM auditor.bit_log WHERE object = 'objects/auto/a' AND row_no = 1`) >= 1
	})
	read := func(key string) string {
		rc, _, err := bs.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, _ := io.ReadAll(rc)
		return string(got)
	}
	if got := read("objects/auto/a"); got != "content of objects/auto/a" {
		t.Errorf("objects/auto/a after the repair: %q", got)
	}
	var task int64
	waitFor("the manual task", func() bool {
		db.QueryRow(ctx, `SELECT id FROM auditor.resolution_tasks WHERE object = 'objects/manual/b' AND kind = 'internal' AND state = 'open'`).Scan(&task)
		return task != 0
	})
	time.Sleep(300 * time.Millisecond) // a few automatic passes: b is not under AUDITOR_AUTO_REPAIR
	if read("objects/manual/b") == "content of objects/manual/b" {
		t.Fatal("objects/manual/b was repaired without an operator")
	}
	if code := post(fmt.Sprintf("/v1/audit/resolutions/%d/repair", task), ""); code != http.StatusOK {
		t.Fatalf("repair: %d", code)
	}
	if got := read("objects/manual/b"); got != "content of objects/manual/b" {
		t.Errorf("objects/manual/b after the repair: %q", got)
	}
	if code := post(fmt.Sprintf("/v1/audit/resolutions/%d/repair", task), ""); code != http.StatusConflict {
		t.Errorf("a closed task repaired again: %d, want 409", code)
	}
}
