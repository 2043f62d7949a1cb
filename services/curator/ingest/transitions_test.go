package ingest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
)

// faulty is a blob store that refuses to store, or to read back, keys
// containing a marker while the fault is on.
type faulty struct {
	blob.Store
	failPut, failStat atomic.Value // string markers ("" off)
}

func (f *faulty) Put(ctx context.Context, key string, r io.Reader, p map[string]string) (blob.Info, error) {
	if m, _ := f.failPut.Load().(string); m != "" && strings.Contains(key, m) {
		return blob.Info{}, errors.New("injected: the store refuses the write")
	}
	return f.Store.Put(ctx, key, r, p)
}

func (f *faulty) Stat(ctx context.Context, key string) (blob.Info, error) {
	if m, _ := f.failStat.Load().(string); m != "" && strings.Contains(key, m) {
		return blob.Info{}, errors.New("injected: the object is not there")
	}
	return f.Store.Stat(ctx, key)
}

// TestEveryTransitionOfTheTable drives the real daemons and the admin API
// (HTTP) through scenarios that between them make every transition of
// ingest.Transitions, then checks the history holds each one, made by whom
// the table says: the table is what the code does.
func TestEveryTransitionOfTheTable(t *testing.T) {
	local, _ := blob.NewLocal(t.TempDir())
	fb := &faulty{Store: local}
	fb.failPut.Store("")
	fb.failStat.Store("")
	o := newOrigin(t)
	r := newRigWith(t, fb, nil)
	var cbFail atomic.Bool
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if cbFail.Load() {
			http.Error(w, "injected", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer cb.Close()
	act := func(path string, wantCode int) {
		t.Helper()
		if code, out := r.call("POST", path, nil); code != wantCode {
			t.Fatalf("POST %s: %d %v, want %d", path, code, out, wantCode)
		}
	}
	sub := func(profile, url, typ string) int64 {
		return r.submit(ingest.Submission{Submitter: "t", Profile: profile, PayloadURL: url, Type: typ, CallbackURL: cb.URL})
	}
	file := func(name, body string) string { return o.put("/f/"+name, []byte(body)) }
	const wait = 20 * time.Second

	// 1. The whole way: one file.
	b := sub("c1", file("ok.txt", "fine"), "file")
	r.waitState(ingest.Batch, b, ingest.Completed, wait)

	// 2. A wrong digest fails the job at once; delete it, report again.
	var m strings.Builder
	fmt.Fprintf(&m, "#%%checkm_0.7\n#%%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileName\n%s | md5 | %s | bad.txt\n#%%eof\n",
		file("bad.txt", "content"), strings.Repeat("0", 32))
	b = sub("c1", o.put("/m/bad.checkm", []byte(m.String())), "manifest")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	j := r.jobsOf(b)[0]
	if st, _ := r.call("GET", fmt.Sprintf("/v1/jobs/%d", j), nil); st != 200 {
		t.Fatal("job status")
	}
	_, js := r.call("GET", fmt.Sprintf("/v1/jobs/%d", j), nil)
	if !strings.Contains(js["error"].(string), "md5 digest") {
		t.Errorf("digest failure reason %q", js["error"])
	}
	act(fmt.Sprintf("/v1/jobs/%d/requeue", j), http.StatusOK) // restarts at downloading, fails again
	r.waitState(ingest.Job, j, ingest.Failed, wait)
	act(fmt.Sprintf("/v1/jobs/%d/delete", j), http.StatusOK)
	act(fmt.Sprintf("/v1/batches/%d/update-reporting", b), http.StatusOK)
	r.waitState(ingest.Batch, b, ingest.Completed, wait)

	// 3. A download failing past its attempts (the origin down for
	// good, as far as its budget goes); fixed, requeued, completed; the
	// batch reports again and fails (another job is still failed), then
	// it is deleted.
	u := file("flaky.txt", "flaky")
	o.mu.Lock()
	o.fail["/f/flaky.txt"] = 1 << 20
	o.mu.Unlock()
	var mm strings.Builder
	fmt.Fprintf(&mm, "#%%checkm_0.7\n%s\n%s\n#%%eof\n", u, file("fine2.txt", "x"))
	b = sub("c1", o.put("/m/flaky.checkm", []byte(mm.String())), "batch-manifest")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	flaky := r.jobsOf(b)[0]
	o.mu.Lock()
	o.fail["/f/flaky.txt"] = 0
	o.mu.Unlock()
	act(fmt.Sprintf("/v1/jobs/%d/requeue", flaky), http.StatusOK)
	r.waitState(ingest.Job, flaky, ingest.Completed, wait)
	var retries int
	r.db.QueryRow(context.Background(), "SELECT retry_count FROM curator.jobs WHERE id = $1", flaky).Scan(&retries)
	if retries != 1 {
		t.Errorf("retry_count %d after one requeue", retries)
	}
	// Refused actions say why.
	code, out := r.call("POST", fmt.Sprintf("/v1/jobs/%d/requeue", flaky), nil)
	if code != http.StatusConflict || !strings.Contains(out["error"].(string), "allowed only from failed") {
		t.Errorf("requeue of a completed job: %d %v", code, out)
	}

	// 4. A corrupt container fails processing; requeued, it fails again.
	b = sub("c1", file("not.zip", "this is not a zip"), "container")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	j = r.jobsOf(b)[0]
	act(fmt.Sprintf("/v1/jobs/%d/requeue", j), http.StatusOK)
	r.waitState(ingest.Job, j, ingest.Failed, wait)
	act(fmt.Sprintf("/v1/batches/%d/update-reporting", b), http.StatusOK) // still failed
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	act(fmt.Sprintf("/v1/batches/%d/delete", b), http.StatusOK)

	// 5. A real container: a zip with a folder.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("dir/a.txt")
	w.Write([]byte("a"))
	zw.Close()
	b = sub("c1", o.put("/f/ok.zip", zb.Bytes()), "container")
	r.waitState(ingest.Batch, b, ingest.Completed, wait)

	// 6. The store refuses a write: storing fails; requeued, it stores.
	fb.failPut.Store("store-me")
	b = sub("c1", file("store-me.txt", "s"), "file")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	fb.failPut.Store("")
	act(fmt.Sprintf("/v1/jobs/%d/requeue", r.jobsOf(b)[0]), http.StatusOK)
	r.waitState(ingest.Job, r.jobsOf(b)[0], ingest.Completed, wait)

	// 7. A stored file does not read back: recording fails; requeued, it
	// records.
	fb.failStat.Store("record-me")
	b = sub("c1", file("record-me.txt", "r"), "file")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	fb.failStat.Store("")
	act(fmt.Sprintf("/v1/jobs/%d/requeue", r.jobsOf(b)[0]), http.StatusOK)
	r.waitState(ingest.Job, r.jobsOf(b)[0], ingest.Completed, wait)

	// 8. The callback fails: notify fails; requeued, it notifies.
	cbFail.Store(true)
	b = sub("c1", file("notify.txt", "n"), "file")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	cbFail.Store(false)
	act(fmt.Sprintf("/v1/jobs/%d/requeue", r.jobsOf(b)[0]), http.StatusOK)
	r.waitState(ingest.Job, r.jobsOf(b)[0], ingest.Completed, wait)
	act(fmt.Sprintf("/v1/batches/%d/update-reporting", b), http.StatusOK)
	r.waitState(ingest.Batch, b, ingest.Completed, wait)

	// 9. An unreadable manifest fails the batch; it is deleted.
	b = sub("c1", o.put("/m/garbage.checkm", []byte("#%checkm_0.7\nnot-a-url | x\n")), "manifest")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)
	act(fmt.Sprintf("/v1/batches/%d/delete", b), http.StatusOK)

	// 10. An object manifest that lists no file fails its job in pending.
	empty := o.put("/m/empty.checkm", []byte("#%checkm_0.7\n#%eof\n"))
	b = sub("c1", o.put("/m/mom.checkm", []byte("#%checkm_0.7\n"+empty+"\n#%eof\n")), "manifest-of-manifests")
	r.waitState(ingest.Batch, b, ingest.Failed, wait)

	// 11. A held collection: a batch submitted to it is held, deleted; the
	// next is held and released with the collection.
	act("/v1/collections/c2/hold", http.StatusOK)
	b = sub("c2", file("h1.txt", "h"), "file")
	r.waitState(ingest.Batch, b, ingest.Held, wait)
	act(fmt.Sprintf("/v1/batches/%d/delete", b), http.StatusOK)
	b = sub("c2", file("h2.txt", "h"), "file")
	r.waitState(ingest.Batch, b, ingest.Held, wait)
	act("/v1/collections/c2/release", http.StatusOK)
	r.waitState(ingest.Batch, b, ingest.Completed, wait)

	// 12. A collection held mid-batch: the manifest is being read when the
	// hold comes; its jobs are held; an operator works on them while the
	// queue is paused; the collection is released and the rest completes.
	gate := make(chan struct{})
	var m3 strings.Builder
	m3.WriteString("#%checkm_0.7\n")
	for i := range 3 {
		fmt.Fprintf(&m3, "%s\n", file(fmt.Sprintf("mid%d.txt", i), "m"))
	}
	mu := o.put("/m/mid.checkm", []byte(m3.String()))
	o.mu.Lock()
	o.hang["/m/mid.checkm"] = gate
	o.mu.Unlock()
	b = sub("c3", mu, "batch-manifest")
	time.Sleep(300 * time.Millisecond) // the batch daemon is reading the manifest
	act("/v1/collections/c3/hold", http.StatusOK)
	close(gate)
	r.waitState(ingest.Batch, b, ingest.Processing, wait)
	jobs := r.jobsOf(b)
	for _, id := range jobs {
		r.waitState(ingest.Job, id, ingest.Held, wait)
	}
	act("/v1/ingest/pause", http.StatusOK)
	act(fmt.Sprintf("/v1/jobs/%d/release", jobs[0]), http.StatusOK)
	act(fmt.Sprintf("/v1/jobs/%d/hold", jobs[0]), http.StatusOK)
	// The batch is not reported yet: deleting a job of it is confirmed.
	act(fmt.Sprintf("/v1/jobs/%d/delete", jobs[2]), http.StatusConflict)
	act(fmt.Sprintf("/v1/jobs/%d/delete?confirm=true", jobs[2]), http.StatusOK)
	act("/v1/ingest/resume", http.StatusOK)
	act("/v1/collections/c3/release", http.StatusOK)
	r.waitState(ingest.Batch, b, ingest.Completed, wait)

	// 13. Cleanup of completed batches.
	act("/v1/ingest/cleanup?older_than=0s", http.StatusOK)
	if s := r.state(ingest.Batch, 1); s != ingest.Deleted {
		t.Errorf("batch 1 is %s after cleanup", s)
	}

	// Every transition of the table happened, made as the table says.
	for _, tr := range ingest.Transitions {
		var n int
		if err := r.db.QueryRow(context.Background(), `SELECT count(*) FROM curator.ingest_history
			WHERE entity = $1 AND from_state = $2 AND to_state = $3 AND by = $4 AND action = $5`,
			tr.Entity, tr.From, tr.To, tr.By, tr.Action).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("%s %s -> %s (%s %s) never happened", tr.Entity, tr.From, tr.To, tr.By, tr.Action)
		}
	}
	// And nothing happened that the table does not have.
	rows, _ := r.db.Query(context.Background(), `SELECT DISTINCT entity, from_state, to_state, by FROM curator.ingest_history`)
	defer rows.Close()
	for rows.Next() {
		var e ingest.Entity
		var from, to ingest.State
		var by ingest.By
		rows.Scan(&e, &from, &to, &by)
		if tr, ok := ingest.Allowed(e, from, to); !ok || (tr.By != by && !hasMove(e, from, to, by)) {
			t.Errorf("history has %s %s -> %s by %s, which the table does not", e, from, to, by)
		}
	}
}

func hasMove(e ingest.Entity, from, to ingest.State, by ingest.By) bool {
	for _, t := range ingest.Transitions {
		if t.Entity == e && t.From == from && t.To == to && t.By == by {
			return true
		}
	}
	return false
}
