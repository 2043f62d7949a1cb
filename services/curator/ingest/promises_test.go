package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
)

// gated is a blob store whose puts of keys containing a marker wait until
// the gate opens.
type gated struct {
	blob.Store
	mu     sync.Mutex
	marker string
	gate   chan struct{}
}

func (g *gated) Put(ctx context.Context, key string, r io.Reader, p map[string]string) (blob.Info, error) {
	g.mu.Lock()
	m, gate := g.marker, g.gate
	g.mu.Unlock()
	if m != "" && strings.Contains(key, m) {
		select {
		case <-gate:
		case <-ctx.Done():
			return blob.Info{}, ctx.Err()
		}
	}
	return g.Store.Put(ctx, key, r, p)
}

// hold makes puts of keys containing marker wait; the returned func lets
// them go.
func (g *gated) hold(marker string) (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.marker, g.gate = marker, make(chan struct{})
	gate := g.gate
	return sync.OnceFunc(func() { close(gate) })
}

// TestConcurrentAddsCarryEachOther: two add-mode deposits of one object at
// once (two batches of its local id) make two versions, the later
// carrying the earlier's new file: the latest version holds the first
// version's file and both deposits'. (Both used to carry v1's files alone,
// the latest silently lacking the other deposit's file.)
func TestConcurrentAddsCarryEachOther(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", PayloadURL: o.objectManifest("c1", "book-c", map[string]string{"base.txt": "base"})})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	gate := make(chan struct{})
	o.mu.Lock()
	o.hang["/c2/a.txt"], o.hang["/c3/b.txt"] = gate, gate
	o.mu.Unlock()
	a := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", SubmissionMode: "add", PayloadURL: o.objectManifest("c2", "book-c", map[string]string{"a.txt": "a"})})
	c := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", SubmissionMode: "add", PayloadURL: o.objectManifest("c3", "book-c", map[string]string{"b.txt": "b"})})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE state = 'downloading'`).Scan(&n)
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs downloading, want both", n)
		}
	}
	close(gate)
	r.waitState(ingest.Batch, a, ingest.Completed, 30*time.Second)
	r.waitState(ingest.Batch, c, ingest.Completed, 30*time.Second)
	var ark string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-c'`).Scan(&ark)
	names := func(v int) string {
		var n []string
		for name := range r.version(ark, v) {
			n = append(n, name)
		}
		sort.Strings(n)
		return strings.Join(n, ",")
	}
	v2, v3 := names(2), names(3)
	if v3 != "a.txt,b.txt,base.txt" || (v2 != "a.txt,base.txt" && v2 != "b.txt,base.txt") {
		t.Errorf("v2 holds %s, v3 %s: want v3 to carry v2's new file beside its own and v1's", v2, v3)
	}
}

// TestWithdrawalWaitsForTheVersionBeingStored: a withdrawal of an object
// while a job stores its next version waits for the job to record it
// (no other job begins one meanwhile), then withdraws every version, the
// new one included: no version is left pointing at deleted files, and a
// deposit that came during the wait fails as the object's withdrawn.
func TestWithdrawalWaitsForTheVersionBeingStored(t *testing.T) {
	local, _ := blob.NewLocal(t.TempDir())
	g := &gated{Store: local}
	o := newOrigin(t)
	r := newRigWith(t, g, nil)
	ctx := context.Background()
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", PayloadURL: o.objectManifest("s1", "book-s", map[string]string{"one.txt": "1"})})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	var ark string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-s'`).Scan(&ark)

	release := g.hold("slow.txt")
	defer release()
	b2 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", SubmissionMode: "add", PayloadURL: o.objectManifest("s2", "book-s", map[string]string{"slow.txt": "2"})})
	r.waitState(ingest.Batch, b2, ingest.Processing, 30*time.Second)
	job := r.jobsOf(b2)[0]
	r.waitState(ingest.Job, job, ingest.Storing, 30*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var v int
		r.db.QueryRow(ctx, `SELECT version FROM curator.jobs WHERE id = $1`, job).Scan(&v)
		if v == 2 {
			break // it holds the object
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not take v2")
		}
	}
	done := make(chan int, 1)
	go func() {
		code, _ := r.call("POST", "/v1/objects/withdraw", map[string]any{"ark": ark, "reason": "a takedown during a deposit"})
		done <- code
	}()
	// The late deposit comes once the withdrawal holds the object (a
	// sleep of 300 ms let it in first on a loaded machine).
	testenv.Eventually(t, 30*time.Second, "the withdrawal holding the object", func() bool {
		var held bool
		err := r.db.QueryRow(ctx, `SELECT coalesce(withdrawal_until > now(), false) FROM curator.ark_versions WHERE ark = $1`, ark).Scan(&held)
		return err == nil && held
	})
	b3 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", SubmissionMode: "add", PayloadURL: o.objectManifest("s3", "book-s", map[string]string{"late.txt": "3"})})
	select {
	case code := <-done:
		t.Fatalf("the withdrawal answered %d while v2 was being stored", code)
	case <-time.After(500 * time.Millisecond):
	}
	release()
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("withdrawal: %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the withdrawal did not end after the version was recorded")
	}
	r.waitState(ingest.Job, job, ingest.Completed, 30*time.Second)
	r.waitState(ingest.Batch, b3, ingest.Failed, 30*time.Second)
	var live, kept int
	r.db.QueryRow(ctx, `SELECT count(*) FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NULL`, ark).Scan(&live)
	rows, _ := r.db.Query(ctx, `SELECT key FROM curator.inventory_files WHERE ark = $1`, ark)
	for rows.Next() {
		var key string
		rows.Scan(&key)
		if _, err := local.Stat(ctx, key); err == nil {
			kept++
		} else if !errors.Is(err, blob.ErrNotFound) {
			t.Fatal(err)
		}
	}
	rows.Close()
	if live != 0 || kept != 0 {
		t.Errorf("after the withdrawal: %d versions not withdrawn, %d of their files still stored; want none", live, kept)
	}
	var versions int
	r.db.QueryRow(ctx, `SELECT count(*) FROM curator.inventory_versions WHERE ark = $1`, ark).Scan(&versions)
	if versions != 2 {
		t.Errorf("%d versions recorded, want 2 (the late deposit refused)", versions)
	}
}

// TestOneMoreColonChangesNoByte: a depositor supplying an ARK that is
// another depositor's with one more ':' gets an object of its own, stored
// under keys of its own: no byte of the other's object changes, and the
// auditor's view (the store's own checksums) of it stays as recorded.
func TestOneMoreColonChangesNoByte(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	deposit := func(submitter, primary, name, body string) int64 {
		t.Helper()
		b := r.submit(ingest.Submission{Submitter: submitter, Profile: "p", Type: "file", Primary: primary, PayloadURL: o.put("/"+submitter+"/"+name, []byte(body))})
		r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
		return b
	}
	deposit("alice", "ark:/13030/m5ab", "page.txt", "alice's page")
	before := map[string]string{}
	rows, _ := r.db.Query(ctx, `SELECT key, sha256 FROM curator.inventory_files WHERE ark = 'ark:13030/m5ab'`)
	for rows.Next() {
		var k, s string
		rows.Scan(&k, &s)
		before[k] = s
	}
	rows.Close()
	deposit("mallory", "ark:/13030/m5a:b", "page.txt", "mallory's page")
	for key, sum := range before {
		info, err := r.bs.Stat(ctx, key)
		if err != nil || info.Checksum.Value != sum {
			t.Errorf("%s: %v %v, want it as alice stored it (%s)", key, info.Checksum, err, sum)
		}
	}
	var shared int
	r.db.QueryRow(ctx, `SELECT count(*) FROM curator.inventory_files a JOIN curator.inventory_files b USING (key) WHERE a.ark <> b.ark`).Scan(&shared)
	if shared != 0 {
		t.Errorf("%d files are two objects' at once", shared)
	}
	code, _ := r.call("POST", "/v1/batches", ingest.Submission{Submitter: "mallory", Profile: "p", Type: "file", Primary: "ark:13030/m5-ab", PayloadURL: o.put("/m/x", []byte("x"))})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	var failed int
	for deadline := time.Now().Add(30 * time.Second); failed == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE submitter = 'mallory' AND state = 'failed' AND error LIKE '%another depositor%'`).Scan(&failed)
	}
	if failed != 1 {
		t.Error(fmt.Sprintf("mallory spelling alice's ARK without its slash was not refused as another depositor's (%d)", failed))
	}
}

// TestTakedownsSurviveARestore: a restore of the database to before a
// withdrawal loses it there, not in the store's register of takedowns,
// which the leader replays: an object the restored database holds live is
// withdrawn again; one it never knew (deposited after the backup) is kept
// as a tombstone bound to its depositor, so that depositing into its ARK
// again fails as withdrawn (and, for another depositor, as another's).
func TestTakedownsSurviveARestore(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_TIDY_INTERVAL": "200ms"})
	ctx := context.Background()
	deposit := func(submitter, primary, localID, name string) int64 {
		t.Helper()
		b := r.submit(ingest.Submission{Submitter: submitter, Profile: "p", Type: "manifest", Primary: primary,
			PayloadURL: o.objectManifest(name, localID, map[string]string{"page.txt": name})})
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if st := r.state(ingest.Batch, b); st == ingest.Completed || st == ingest.Failed {
				return b
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch %d did not end", b)
			}
		}
	}
	deposit("alice", "", "book-r", "r1")
	deposit("alice", "ark:/13030/gone", "", "r2")
	var kept string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-r'`).Scan(&kept)
	for _, a := range []string{kept, "ark:13030/gone"} {
		if code, out := r.call("POST", "/v1/objects/withdraw", map[string]any{"ark": a, "reason": "a court order"}); code != http.StatusOK {
			t.Fatalf("withdraw %s: %d %v", a, code, out)
		}
	}
	// The restore: the first object back to before its withdrawal, the
	// second to before its deposit.
	for _, q := range []string{
		`UPDATE curator.inventory_versions SET withdrawn_at = NULL, withdrawn_reason = '' WHERE ark = '` + kept + `'`,
		`UPDATE curator.inventory_objects SET withdrawn_at = NULL, withdrawn_reason = '' WHERE ark = '` + kept + `'`,
		`DELETE FROM curator.inventory_files WHERE ark = 'ark:13030/gone'`,
		`DELETE FROM curator.inventory_versions WHERE ark = 'ark:13030/gone'`,
		`DELETE FROM curator.inventory_objects WHERE ark = 'ark:13030/gone'`,
		`DELETE FROM curator.arks WHERE ark = 'ark:13030/gone'`,
		`DELETE FROM curator.ark_versions WHERE ark = 'ark:13030/gone'`,
		`DELETE FROM curator.jobs WHERE ark = 'ark:13030/gone'`,
		`DELETE FROM curator.withdrawals`,
		`UPDATE curator.takedown_replay SET after = ''`,
		`DELETE FROM curator.takedowns_applied`,
	} {
		if _, err := r.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var again, tomb bool
		r.db.QueryRow(ctx, `SELECT withdrawn_at IS NOT NULL FROM curator.inventory_objects WHERE ark = $1`, kept).Scan(&again)
		r.db.QueryRow(ctx, `SELECT withdrawn_at IS NOT NULL FROM curator.inventory_objects WHERE ark = 'ark:13030/gone'`).Scan(&tomb)
		if again && tomb {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: the live object withdrawn again %t, the forgotten one a tombstone %t", again, tomb)
		}
	}
	for _, c := range []struct{ submitter, want string }{{"alice", "withdrawn"}, {"mallory", "another depositor"}} {
		b := deposit(c.submitter, "ark:/13030/gone", "", "r3-"+c.submitter)
		job := r.jobsOf(b)[0]
		var msg string
		r.db.QueryRow(ctx, `SELECT error FROM curator.jobs WHERE id = $1`, job).Scan(&msg)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s depositing into the forgotten, taken-down ARK: %q, want it failed: %s", c.submitter, msg, c.want)
		}
	}
}

// TestAReinstatementStands: an object withdrawn and reinstated stays
// reinstated when its withdrawn versions are withdrawn again (by an
// operator, or by the register's replay finishing a takedown again): the
// object was withdrawn whenever no version of it was live, and the replay
// took a reinstated object down anew.
func TestAReinstatementStands(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_TIDY_INTERVAL": "100ms"})
	ctx := context.Background()
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", PayloadURL: o.objectManifest("st1", "book-st", map[string]string{"a.txt": "a"})})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	var a string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-st'`).Scan(&a)
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/objects/withdraw", map[string]any{"ark": a, "reason": "a takedown"}},
		{"/v1/objects/reinstate", map[string]any{"ark": a, "reason": "cleared"}},
		{"/v1/objects/withdraw", map[string]any{"ark": a, "version": 1, "reason": "again"}},
	} {
		if code, out := r.call("POST", c.path, c.body); code != http.StatusOK {
			t.Fatalf("%s: %d %v", c.path, code, out)
		}
	}
	var passes int64
	r.db.QueryRow(ctx, `SELECT passes FROM curator.takedown_replay`).Scan(&passes)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var now int64
		r.db.QueryRow(ctx, `SELECT passes FROM curator.takedown_replay`).Scan(&now)
		if now >= passes+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the register was not replayed")
		}
	}
	var withdrawn bool
	r.db.QueryRow(ctx, `SELECT withdrawn_at IS NOT NULL FROM curator.inventory_objects WHERE ark = $1`, a).Scan(&withdrawn)
	if withdrawn {
		t.Error("the reinstated object was withdrawn again")
	}
}

// TestATakedownAfterAReinstatementSurvivesARestore: an object withdrawn,
// reinstated and (after the backup) withdrawn again is withdrawn again
// after the restore, though the restored database lists the register's
// entries as applied: the second takedown wrote them anew, and an entry is
// applied only as the database last saw it (its checksum). Found by the
// model: the database listed the key, and the late takedown was lost.
func TestATakedownAfterAReinstatementSurvivesARestore(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_TIDY_INTERVAL": "100ms"})
	ctx := context.Background()
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", PayloadURL: o.objectManifest("rr1", "book-rr", map[string]string{"a.txt": "a"})})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	var a string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-rr'`).Scan(&a)
	post := func(path string, body map[string]any) {
		t.Helper()
		if code, out := r.call("POST", path, body); code != http.StatusOK {
			t.Fatalf("%s: %d %v", path, code, out)
		}
	}
	passes := func() (n int64) {
		r.db.QueryRow(ctx, `SELECT passes FROM curator.takedown_replay`).Scan(&n)
		return n
	}
	post("/v1/objects/withdraw", map[string]any{"ark": a, "reason": "a takedown"})
	post("/v1/objects/reinstate", map[string]any{"ark": a, "reason": "cleared"})
	for p, deadline := passes(), time.Now().Add(20*time.Second); passes() < p+2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the register was not replayed")
		}
	}
	// The backup: what the database lists as applied, and its withdrawals.
	rows, _ := r.db.Query(ctx, `SELECT key, checksum FROM curator.takedowns_applied`)
	type applied struct{ Key, Checksum string }
	backup, err := pgx.CollectRows(rows, pgx.RowToStructByPos[applied])
	if err != nil || len(backup) == 0 {
		t.Fatalf("the entries applied before the backup: %v %v", backup, err)
	}
	var at time.Time
	r.db.QueryRow(ctx, `SELECT now()`).Scan(&at)
	post("/v1/objects/withdraw", map[string]any{"ark": a, "reason": "a late takedown"})
	// The restore: the object reinstated, the late takedown forgotten,
	// the entries listed as before; the passes as many as the store's, so
	// that nothing but the entries themselves can tell.
	for _, q := range []string{
		`UPDATE curator.inventory_objects SET withdrawn_at = NULL, withdrawn_reason = '' WHERE ark = '` + a + `'`,
		`DELETE FROM curator.withdrawals WHERE at >= '` + at.Format(time.RFC3339Nano) + `'`,
		`DELETE FROM curator.takedowns_applied`,
		`UPDATE curator.takedown_replay SET after = '', passes = 1000000, full_pass = false`,
	} {
		if _, err := r.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range backup {
		if _, err := r.db.Exec(ctx, `INSERT INTO curator.takedowns_applied (key, checksum) VALUES ($1, $2)`, e.Key, e.Checksum); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var withdrawn bool
		r.db.QueryRow(ctx, `SELECT withdrawn_at IS NOT NULL FROM curator.inventory_objects WHERE ark = $1`, a).Scan(&withdrawn)
		if withdrawn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("after 20 s the late takedown, lost to the restore, was not applied again")
		}
	}
}
