package auditor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestAuditorEndToEnd: objects recorded by events are scheduled over a short
// cycle, checked by the worker manager, and one that rotted on disk is
// found; an on-demand check goes high priority; the status shows it all.
func TestAuditorEndToEnd(t *testing.T) {
	ctx := context.Background()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	testenv.StartServiceIn(t, auditor.Definition(), sh, map[string]string{
		"AUDITOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "AUDITOR_CYCLE": "2s", "AUDITOR_SCHEDULE_TICK": "100ms",
		"AUDITOR_IDLE_BACKOFF_MIN": "50ms", "AUDITOR_IDLE_BACKOFF_MAX": "200ms", "AUDITOR_RETRY_DELAY": "100ms",
		"AUDITOR_MAX_ON_DEMAND": "15",
	})
	b := testenv.BusAt(t, sh.NATSURL, "ingest")
	var batch []bus.Outgoing
	for i := range 20 {
		key := fmt.Sprintf("objects/%02d", i)
		content := fmt.Sprintf("content of %d", i)
		if _, err := bs.Put(ctx, key, strings.NewReader(content), nil); err != nil {
			t.Fatal(err)
		}
		env, _ := events.New("ingest", &events.ObjectRecorded{Object: key, SHA256: sum(content), Size: int64(len(content))})
		batch = append(batch, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	if err := b.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// Object 07 rots on disk (same size and time): the provider's checksum
	// still describes the old bytes.
	p := filepath.Join(bs.Root(), "objects/07")
	fi, _ := os.Stat(p)
	os.WriteFile(p, []byte("CONTENT OF 7"), 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())

	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var checked, sour int
		db.QueryRow(ctx, `SELECT count(DISTINCT object), count(*) FILTER (WHERE row_no = 2) FROM auditor.bit_log`).Scan(&checked, &sour)
		if checked == 20 && sour >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d objects checked, %d sour found", checked, sour)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var object string
	db.QueryRow(ctx, `SELECT object FROM auditor.resolution_tasks WHERE row_no = 2`).Scan(&object)
	if object != "objects/07" {
		t.Errorf("resolution task for %q, want objects/07", object)
	}
	// An operator lists the open resolution tasks and closes one (its
	// object is checked again); it is then no longer open.
	api := fmt.Sprintf("http://127.0.0.1:%d/v1/audit/resolutions", port)
	openTasks := func() []auditor.Resolution {
		resp, err := http.Get(api)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res []auditor.Resolution
		json.NewDecoder(resp.Body).Decode(&res)
		return res
	}
	res := openTasks()
	if len(res) != 1 || res[0].Object != "objects/07" || res[0].Row != 2 || res[0].Kind != "external" {
		t.Fatalf("open resolution tasks %+v, want objects/07's (row 2, external: no secondary copy)", res)
	}
	for _, c := range []struct {
		want string
		code int
	}{{"first", http.StatusOK}, {"again", http.StatusNotFound}} {
		want, code := c.want, c.code
		resp, err := http.Post(fmt.Sprintf("%s/%d/close", api, res[0].ID), "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("close %s: %d, want %d", want, resp.StatusCode, code)
		}
	}
	// (The check the close queued finds the content still sour and opens
	// a new task; the closed one stays closed.)
	for _, r := range openTasks() {
		if r.ID == res[0].ID {
			t.Errorf("resolution task %d still open after its close", r.ID)
		}
	}

	// On demand, high priority.
	var asked time.Time
	db.QueryRow(ctx, `SELECT now()`).Scan(&asked)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/check", port), "application/json", strings.NewReader(`{"space": "objects/1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var queued map[string]int
	json.NewDecoder(resp.Body).Decode(&queued)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || queued["queued"] != 10 {
		t.Errorf("on-demand check of objects/1*: %d %v", resp.StatusCode, queued)
	}
	resp, _ = http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/check", port), "application/json", strings.NewReader(`{"object": "../etc"}`))
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad object key: %d", resp.StatusCode)
	}
	resp.Body.Close()
	// A repeat before the first is done queues nothing more (only objects
	// checked since, by the first or by the schedule, are queued again).
	high, err := b.JetStream().Stream(ctx, events.StreamAuditHigh)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := high.Info(ctx)
	resp, _ = http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/check", port), "application/json", strings.NewReader(`{"space": "objects/1"}`))
	resp.Body.Close()
	var since int
	db.QueryRow(ctx, `SELECT count(*) FROM auditor.schedule WHERE starts_with(object, 'objects/1') AND checked_at >= $1`, asked).Scan(&since)
	if after, _ := high.Info(ctx); after.State.LastSeq-before.State.LastSeq > uint64(since) {
		t.Errorf("a repeated on-demand check queued %d more tasks; only %d objects were checked since the first", after.State.LastSeq-before.State.LastSeq, since)
	}
	// Once those checks are done, asking again checks again (an operator
	// re-checking after a repair is not ignored as a duplicate).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, _ := high.Info(ctx) // a work queue: a task done is gone
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d on-demand checks not done after 20s", info.State.Msgs)
		}
	}
	before, _ = high.Info(ctx)
	resp, _ = http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/check", port), "application/json", strings.NewReader(`{"space": "objects/1"}`))
	resp.Body.Close()
	if after, _ := high.Info(ctx); after.State.LastSeq-before.State.LastSeq != 10 {
		t.Errorf("asked again after the checks were done: %d tasks queued, want 10", after.State.LastSeq-before.State.LastSeq)
	}
	// Too broad: a one-letter space, and one of more than AUDITOR_MAX_ON_DEMAND objects.
	for body, want := range map[string]string{`{"space": "o"}`: "AUDITOR_MIN_SPACE_PREFIX", `{"space": "objects/"}`: "AUDITOR_MAX_ON_DEMAND"} {
		resp, _ = http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/check", port), "application/json", strings.NewReader(body))
		var e map[string]string
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e["error"], want) {
			t.Errorf("%s: %d %v, want 400 naming %s", body, resp.StatusCode, e, want)
		}
	}

	// The status: every object checked in a cycle. The cycle is 2 s, so
	// on a loaded machine a status read just after a new cycle began shows
	// part of it: read until one shows the whole cycle.
	var st auditor.Status
	testenv.Eventually(t, 30*time.Second, "a status with every object checked in its cycle", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/status", port))
		if err != nil {
			t.Fatal(err)
		}
		st = auditor.Status{}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st) // a status is a few hundred bytes
		resp.Body.Close()
		return st.CheckedThisCycle >= 20
	})
	if st.Objects != 20 || st.FailuresByRow["2"] < 1 || st.OpenResolutions["external"] != 1 {
		t.Errorf("status %+v", st)
	}
}

// TestScheduleSpreadsAndRequeues: the cycle's checks are spread over it,
// and a check whose task was lost is queued again from PostgreSQL.
func TestScheduleSpreadsAndRequeues(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "auditor")
	db := testenv.DB(t, migrations.Schema)
	bs, _ := blob.NewLocal(t.TempDir())
	a := auditor.New(b, db, bs, nil, auditor.Config{Cycle: time.Hour, RequeueAfter: time.Minute}, testenv.Logger(t))
	now := time.Now()
	for i := range 1000 {
		o := fmt.Sprintf("o/%04d", i)
		if _, err := db.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due) VALUES ($1, $2)`,
			o, now.Add(integrityOffset(o, time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	// A quarter of the cycle later, about a quarter is due.
	n, err := a.QueueDue(ctx, now.Add(15*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n < 200 || n > 300 {
		t.Errorf("%d of 1000 due after a quarter of the cycle: not spread evenly", n)
	}
	// Their tasks are lost; an hour later they are queued again.
	st, _ := b.JetStream().Stream(ctx, events.StreamAuditLow)
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := a.Requeue(ctx, now.Add(15*time.Minute+2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if m != n {
		t.Errorf("re-queued %d of %d lost checks", m, n)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != uint64(n) {
		t.Errorf("%d tasks in the low queue, want %d", info.State.Msgs, n)
	}
}

func integrityOffset(o string, cycle time.Duration) time.Duration { return integrity.Offset(o, cycle) }

// TestLongOverdueChecksAreQueuedOnce: objects overdue by more than a cycle
// (the auditor was down, or an archive was imported with old due times)
// are queued once, and their next check keeps its place in the cycle, the
// first one after now. Their next due time used to become now itself, due
// again at once: every such object was queued twice by one QueueDue.
func TestLongOverdueChecksAreQueuedOnce(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "auditor")
	db := testenv.DB(t, migrations.Schema)
	a := auditor.New(b, db, nil, nil, auditor.Config{Cycle: time.Hour}, testenv.Logger(t))
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for i, overdue := range []time.Duration{10 * time.Minute, 150 * time.Minute, 49 * time.Hour} {
		if _, err := db.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due) VALUES ($1, $2)`, fmt.Sprintf("o/%d", i), now.Add(-overdue)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := a.QueueDue(ctx, now)
	if err != nil || n != 3 {
		t.Fatalf("queued %d (%v), want each of the 3 once", n, err)
	}
	st, _ := b.JetStream().Stream(ctx, events.StreamAuditLow)
	if info, _ := st.Info(ctx); info.State.Msgs != 3 {
		t.Errorf("%d tasks in the low queue, want 3", info.State.Msgs)
	}
	for i, want := range []time.Time{now.Add(50 * time.Minute), now.Add(30 * time.Minute), now.Add(time.Hour)} {
		var next time.Time
		db.QueryRow(ctx, `SELECT next_due FROM auditor.schedule WHERE object = $1`, fmt.Sprintf("o/%d", i)).Scan(&next)
		if !next.Equal(want) {
			t.Errorf("o/%d next due %s, want %s (its place in the cycle, after now)", i, next.UTC(), want)
		}
	}
}
