package integrity_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

type env struct {
	t     *testing.T
	ctx   context.Context
	db    *pgxpool.Pool
	store *blob.Local
	chk   *integrity.Checker
}

func setup(t *testing.T, secondary blob.Store) *env {
	t.Helper()
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.DB(t, migrations.Schema)
	return &env{t: t, ctx: context.Background(), db: db, store: store, chk: integrity.New(db, store, secondary)}
}

const obj = "warc/a.warc.gz"

func (e *env) put(content string, props map[string]string) {
	e.t.Helper()
	if _, err := e.store.Put(e.ctx, obj, strings.NewReader(content), props); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) index(checksum *string) {
	e.t.Helper()
	if _, err := e.db.Exec(e.ctx, `INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, 7)`, obj, checksum); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) log(checksum string, props *string) {
	e.t.Helper()
	if _, err := e.db.Exec(e.ctx, `INSERT INTO auditor.audit_log (object, action, checksum, size, properties) VALUES ($1, 'add', $2, 7, $3::jsonb)`, obj, checksum, props); err != nil {
		e.t.Fatal(err)
	}
}

// rot changes the stored bytes behind the store's back, keeping size and
// modification time: the provider's checksum still describes the old bytes.
func (e *env) rot(content string) {
	e.t.Helper()
	p := filepath.Join(e.store.Root(), obj)
	fi, err := os.Stat(p)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		e.t.Fatal(err)
	}
}

// breakProvider makes the store's own checksum wrong.
// breakProvider makes the local store's recorded checksum of obj wrong
// (it keeps it in an extended attribute of the file).
func (e *env) breakProvider() {
	e.t.Helper()
	p := filepath.Join(e.store.Root(), obj)
	b := make([]byte, 4096)
	n, err := unix.Getxattr(p, "user.archivist.meta", b)
	if err != nil {
		e.t.Fatal(err)
	}
	b = b[:n]
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber() // keep the modification time exact, or the store recomputes
	dec.Decode(&m)
	m["sha256"] = sum("something else")
	b, _ = json.Marshal(m)
	if err := unix.Setxattr(p, "user.archivist.meta", b, 0); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) check(light bool, attempt int) (integrity.Result, error) {
	e.t.Helper()
	return e.chk.Check(e.ctx, obj, light, attempt, 3)
}

func (e *env) mustRow(res integrity.Result, err error, row int) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("check: %v", err)
	}
	if !res.Matched || res.Row.No != row {
		e.t.Fatalf("matched row %d (%v), want %d; observed %+v", res.Row.No, res.Matched, row, res.Observation)
	}
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(e.ctx, q, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) bitLog() (rows int, success, bitError bool) {
	e.t.Helper()
	rows = e.count(`SELECT count(*) FROM auditor.bit_log`)
	if rows > 0 {
		e.db.QueryRow(e.ctx, `SELECT success, bit_error FROM auditor.bit_log ORDER BY id DESC LIMIT 1`).Scan(&success, &bitError)
	}
	return
}

func (e *env) expectBitLog(rows int, success, bitError bool) {
	e.t.Helper()
	r, s, b := e.bitLog()
	if r != rows || (rows > 0 && (s != success || b != bitError)) {
		e.t.Errorf("bit log: %d rows, last success=%v bit_error=%v; want %d rows, success=%v bit_error=%v", r, s, b, rows, success, bitError)
	}
}

func (e *env) resolutions(kind string) int {
	return e.count(`SELECT count(*) FROM auditor.resolution_tasks WHERE state = 'open' AND kind = $1`, kind)
}

func (e *env) audits() int { return e.count(`SELECT count(*) FROM auditor.audit_queue WHERE NOT done`) }

func ptr(s string) *string { return &s }

// TestTableIsConsistent: every row is found by its own states, and no two
// rows claim the same concrete combination.
func TestTableIsConsistent(t *testing.T) {
	concrete := func(s integrity.State) []integrity.State {
		switch s {
		case integrity.Any:
			return []integrity.State{integrity.OK, integrity.NA}
		case integrity.BadNull:
			return []integrity.State{integrity.Bad, integrity.Missing}
		}
		return []integrity.State{s}
	}
	seen := map[string]int{}
	for _, r := range integrity.Table {
		for _, c := range concrete(r.Content) {
			for _, p := range concrete(r.Provider) {
				for _, i := range concrete(r.Index) {
					got, ok := integrity.Match(c, p, i, r.Log)
					if !ok || got.No != r.No {
						t.Errorf("row %d: states %s %s %s %s match row %d", r.No, c, p, i, r.Log, got.No)
					}
					key := string(c + "/" + p + "/" + i + "/" + r.Log)
					if other, dup := seen[key]; dup {
						t.Errorf("rows %d and %d both claim %s", other, r.No, key)
					}
					seen[key] = r.No
				}
			}
		}
	}
	if len(integrity.Table) != 11 {
		t.Errorf("%d rows, want 11", len(integrity.Table))
	}
}

func TestRow1AllAgree(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	e.log(sum("content"), nil)
	res, err := e.check(false, 1)
	e.mustRow(res, err, 1)
	e.expectBitLog(1, true, false)
	res, err = e.check(true, 1) // light: content N/A
	e.mustRow(res, err, 1)
	if res.Observation.Content.State != integrity.NA {
		t.Errorf("light check read the content: %+v", res.Observation.Content)
	}
}

func TestRow2ContentWentSour(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	e.log(sum("content"), nil)
	e.rot("CONTENT")
	res, err := e.check(false, 1)
	e.mustRow(res, err, 2)
	e.expectBitLog(1, false, false)
	if e.resolutions("external") != 1 {
		t.Error("no externally resolvable task without a secondary copy")
	}

	// With a secondary store that has the good bytes: internally resolvable.
	secondary, _ := blob.NewLocal(t.TempDir())
	secondary.Put(context.Background(), obj, strings.NewReader("content"), nil)
	e2 := setup(t, secondary)
	e2.put("content", nil)
	e2.index(ptr(sum("content")))
	e2.log(sum("content"), nil)
	e2.rot("CONTENT")
	res, err = e2.check(false, 1)
	e2.mustRow(res, err, 2)
	if e2.resolutions("internal") != 1 {
		t.Error("no internally resolvable task with a secondary copy")
	}
}

func TestRow3ProviderChecksumFailed(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	e.log(sum("content"), nil)
	e.breakProvider()
	res, err := e.check(false, 1)
	e.mustRow(res, err, 3)
	e.expectBitLog(1, false, false)
	if e.resolutions("external") != 1 {
		t.Error("no externally resolvable task")
	}
}

func TestRow4ProviderDisagreesWithoutContent(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	e.log(sum("content"), nil)
	e.breakProvider()
	res, err := e.check(true, 1)
	if !errors.Is(err, integrity.ErrRetryLater) || res.Row.No != 4 {
		t.Fatalf("attempt 1: row %d, %v; want row 4, retry later", res.Row.No, err)
	}
	e.expectBitLog(0, false, false)
	res, err = e.check(true, 3)
	e.mustRow(res, err, 4)
	e.expectBitLog(1, false, true)
}

func TestRow5ContentIndexCorrupted(t *testing.T) {
	for _, c := range []struct {
		name  string
		index *string
	}{{"wrong", ptr(sum("garbled"))}, {"null", nil}} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, nil)
			e.put("content", map[string]string{"content-type": "application/warc"})
			e.index(c.index)
			e.log(sum("content"), nil) // the audit log's properties are null
			res, err := e.check(false, 1)
			e.mustRow(res, err, 5)
			e.expectBitLog(1, false, false)
			var checksum string
			var props []byte
			e.db.QueryRow(e.ctx, `SELECT checksum, properties FROM auditor.content_index WHERE object = $1`, obj).Scan(&checksum, &props)
			if checksum != sum("content") {
				t.Errorf("content index not repaired: %s", checksum)
			}
			if !strings.Contains(string(props), "application/warc") {
				t.Errorf("content index properties not patched from the provider: %s", props)
			}
			if n := e.count(`SELECT count(*) FROM auditor.audit_log WHERE source = 'patch' AND properties->>'content-type' = 'application/warc'`); n != 1 {
				t.Errorf("audit log not patched from the provider's properties (%d)", n)
			}
		})
	}
}

func TestRow6AuditLogCorrupted(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	e.log(sum("garbled"), nil)
	res, err := e.check(false, 1)
	e.mustRow(res, err, 6)
	e.expectBitLog(1, false, false)
	if e.resolutions("internal") != 1 {
		t.Error("no internally resolvable task")
	}
}

func TestRow7AuditRecordLost(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	e.index(ptr(sum("content")))
	res, err := e.check(false, 1)
	e.mustRow(res, err, 7)
	e.expectBitLog(1, false, false)
	if e.audits() != 1 {
		t.Error("not added to the audit queue")
	}
}

func TestRow8RemovedAtProvider(t *testing.T) {
	e := setup(t, nil)
	e.index(ptr(sum("content")))
	e.log(sum("content"), nil)
	res, err := e.check(false, 1)
	if !errors.Is(err, integrity.ErrRetryLater) || res.Row.No != 8 {
		t.Fatalf("attempt 1: row %d, %v; want row 8, retry later", res.Row.No, err)
	}
	e.expectBitLog(0, false, false)
	res, err = e.check(false, 3)
	e.mustRow(res, err, 8)
	e.expectBitLog(1, false, true)
}

func TestRow9AddedAtProvider(t *testing.T) {
	e := setup(t, nil)
	e.put("content", nil)
	res, err := e.check(false, 2)
	if !errors.Is(err, integrity.ErrRetryLater) || res.Row.No != 9 {
		t.Fatalf("attempt 2: row %d, %v; want row 9, retry later", res.Row.No, err)
	}
	res, err = e.check(false, 3)
	e.mustRow(res, err, 9)
	e.expectBitLog(1, false, true)
	if e.audits() != 1 {
		t.Error("not added to the audit queue")
	}
}

func TestRow10UpdatedAtProvider(t *testing.T) {
	e := setup(t, nil)
	e.put("new content", nil)
	e.index(ptr(sum("old content")))
	e.log(sum("old content"), nil)
	if _, err := e.check(false, 1); !errors.Is(err, integrity.ErrRetryLater) {
		t.Fatalf("attempt 1: %v, want retry later", err)
	}
	res, err := e.check(false, 3)
	e.mustRow(res, err, 10)
	e.expectBitLog(1, false, true)
	if e.audits() != 1 {
		t.Error("not added to the audit queue")
	}
}

func TestRow11BehindDeletes(t *testing.T) {
	e := setup(t, nil)
	res, err := e.check(false, 1)
	e.mustRow(res, err, 11)
	e.expectBitLog(0, false, false)
	if e.audits() != 0 || e.resolutions("internal")+e.resolutions("external") != 0 {
		t.Error("row 11 did something")
	}
}

// TestAVersionWrittenOverIsRotNeverAnUpdate: under blob.ImmutablePrefix a
// stored version never changes, so bytes written over one (the store's
// own checksum following them, as an overwrite through another key
// mapping to it would) are the version gone sour, row 2, with a
// resolution task, never row 10's update to capture; the same outside the
// prefix is still row 10.
func TestAVersionWrittenOverIsRotNeverAnUpdate(t *testing.T) {
	e := setup(t, nil)
	const version = "objects/ark:99999%2Ffk4x/v1/producer/page.txt"
	if _, err := blob.Restore(e.ctx, e.store, version, strings.NewReader("written over"), sum("written over")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(e.ctx, `INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, 7)`, version, sum("recorded")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(e.ctx, `INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, 7)`, version, sum("recorded")); err != nil {
		t.Fatal(err)
	}
	res, err := e.chk.Check(e.ctx, version, false, 1, 3)
	if err != nil || !res.Matched || res.Row.No != 2 {
		t.Fatalf("a version written over: row %d (%v), want row 2; observed %+v", res.Row.No, err, res.Observation)
	}
	if e.resolutions("external") != 1 || e.audits() != 0 {
		t.Errorf("%d external tasks, %d audits: want the rot reported, nothing captured", e.resolutions("external"), e.audits())
	}
	var idx string
	e.db.QueryRow(e.ctx, `SELECT checksum FROM auditor.content_index WHERE object = $1`, version).Scan(&idx)
	if idx != sum("recorded") {
		t.Error("the content index took the bytes written over")
	}
}
