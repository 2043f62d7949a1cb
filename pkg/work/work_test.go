package work_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// widgets is a pipeline of two kinds of item in two tables, each with a
// history, as a pipeline's schema would have them.
var widgets = store.Schema{Name: "widgets", Migrations: fstest.MapFS{"001_widgets.sql": {Data: []byte(`
CREATE TABLE widgets.gears (id bigserial PRIMARY KEY, state text NOT NULL, state_at timestamptz NOT NULL DEFAULT now(),
	owner text NOT NULL DEFAULT '', label text NOT NULL DEFAULT '', error text NOT NULL DEFAULT '');
CREATE TABLE widgets.cogs (id text PRIMARY KEY, state text NOT NULL, state_at timestamptz NOT NULL DEFAULT now(), error text NOT NULL DEFAULT '');
CREATE TABLE widgets.history (kind text, id text, from_state text, to_state text, detail text);
CREATE TABLE widgets.springs (id bigint PRIMARY KEY, failures int NOT NULL DEFAULT 0, first_failed_at timestamptz, next_at timestamptz,
	err text NOT NULL DEFAULT '', parked_at timestamptz, why text);
`)}}}

func sources() []work.Source {
	do := func(kind, table string) func(context.Context, pgx.Tx, work.Verb, []string, work.Note) (func(context.Context), error) {
		return func(ctx context.Context, tx pgx.Tx, v work.Verb, ids []string, note work.Note) (func(context.Context), error) {
			_, err := tx.Exec(ctx, `WITH m AS (UPDATE widgets.`+table+` SET state = 'pending', state_at = now() WHERE id::text = ANY($1) RETURNING id::text)
				INSERT INTO widgets.history SELECT $2, id, 'failed', 'pending', $3 FROM m`, ids, kind, note.String())
			return nil, err
		}
	}
	gears := &work.SQLSource{PipelineName: "shop", KindName: "gear",
		Table: work.Table{From: "widgets.gears g", Lock: "g", ID: "g.id", IDType: "bigint", State: "g.state", MovedAt: "g.state_at",
			Reason: "g.error", Submitter: "g.owner", Keys: []string{"g.label"}, Text: "g.error"},
		From: map[work.Verb][]string{work.Retry: {"failed"}}}
	gears.Do = do("gear", "gears")
	cogs := &work.SQLSource{PipelineName: "shop", KindName: "cog",
		Table: work.Table{From: "widgets.cogs c", Lock: "c", ID: "c.id", IDType: "text", State: "c.state", MovedAt: "c.state_at",
			Reason: "c.error", Text: "c.error"},
		From: map[work.Verb][]string{work.Retry: {"failed"}}}
	cogs.Do = do("cog", "cogs")
	return []work.Source{gears, cogs}
}

func newStore(t *testing.T) (*work.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	db, err := pgxpool.New(ctx, testenv.DBURL(t, widgets, work.Schema("widgets")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &work.Store{DB: db, Schema: "widgets", Sources: sources()}, db
}

// TestPagesListEveryItemOnceInOrder: items of two kinds, many of them
// moved in one transaction (one moved_at), are listed page by page each
// exactly once, the latest moved first.
func TestPagesListEveryItemOnceInOrder(t *testing.T) {
	ctx := context.Background()
	s, db := newStore(t)
	// Three moments, each shared by items of both kinds.
	for i, at := range []string{"2026-01-01", "2026-02-01", "2026-03-01"} {
		if _, err := db.Exec(ctx, `INSERT INTO widgets.gears (state, state_at, owner) SELECT 'failed', $1, 'o' || (g % 2) FROM generate_series(1, 23) g`, at); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO widgets.cogs (id, state, state_at) SELECT $2 || '-' || g, 'failed', $1 FROM generate_series(1, 17) g`, at, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 7, 40, 500} {
		seen := map[string]bool{}
		var prev *work.Item
		after := ""
		for pages := 0; ; pages++ {
			p, err := s.Find(ctx, work.Filter{}, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				if seen[it.Ref()] {
					t.Fatalf("limit %d: %s listed twice", limit, it.Ref())
				}
				seen[it.Ref()] = true
				if prev != nil && it.MovedAt.After(prev.MovedAt) {
					t.Fatalf("limit %d: %s (%s) after %s (%s)", limit, it.Ref(), it.MovedAt, prev.Ref(), prev.MovedAt)
				}
				prev = &it
			}
			if p.Next == "" {
				break
			}
			after = p.Next
			if pages > 200 {
				t.Fatal("no end of pages")
			}
		}
		if len(seen) != 3*(23+17) {
			t.Fatalf("limit %d: %d items listed, want %d", limit, len(seen), 3*(23+17))
		}
	}
	// A filter: one kind, one depositor, a query.
	if p, err := s.Find(ctx, work.Filter{Kind: "gear", Submitter: "o1"}, "", 500); err != nil || len(p.Items) != 36 {
		t.Fatalf("o1's gears: %d, %v", len(p.Items), err)
	}
	if p, err := s.Find(ctx, work.Filter{Kind: "gear", OlderThan: 24 * time.Hour}, "", 500); err != nil || len(p.Items) != 69 {
		t.Fatalf("gears older than a day: %d, %v", len(p.Items), err)
	}
	if p, err := s.Find(ctx, work.Filter{Kind: "cog", Submitter: "o1"}, "", 500); err != nil || len(p.Items) != 0 {
		t.Fatalf("cogs have no depositor, so none is o1's: %d, %v", len(p.Items), err)
	}
	if p, err := s.Find(ctx, work.Filter{Query: "2-5"}, "", 500); err != nil || len(p.Items) != 1 || p.Items[0].Ref() != "shop/cog/2-5" {
		t.Fatalf("query by id: %+v, %v", p.Items, err)
	}
	if _, err := s.Find(ctx, work.Filter{}, "not-a-cursor", 5); !errors.As(err, new(*work.InvalidError)) {
		t.Fatalf("a bad cursor: %v", err)
	}
}

// TestAnActionMovesWhatItsDryRunCounted: the dry run counts, an action
// with another count is refused (and logged), the action with the count
// moves exactly those items, logs them and writes each one's history.
func TestAnActionMovesWhatItsDryRunCounted(t *testing.T) {
	ctx := context.Background()
	s, db := newStore(t)
	if _, err := db.Exec(ctx, `INSERT INTO widgets.gears (state, error, owner) SELECT CASE WHEN g % 3 = 0 THEN 'done' ELSE 'failed' END,
		CASE WHEN g % 2 = 0 THEN 'origin timed out' ELSE 'digest mismatch' END, 'o' FROM generate_series(1, 30) g`); err != nil {
		t.Fatal(err)
	}
	f := work.Filter{Query: "timed out", States: []string{"failed"}}
	c, err := s.DryRun(ctx, work.Retry, f)
	if err != nil {
		t.Fatal(err)
	}
	if c.N != 10 || c.ByKind["shop/gear"] != 10 {
		t.Fatalf("dry run: %+v, want 10 gears (failed, timed out)", c)
	}
	var moved *work.MovedError
	if _, err := s.Act(ctx, work.Retry, f, 11, "ops"); !errors.As(err, &moved) || moved.Now != 10 {
		t.Fatalf("an action confirmed with 11: %v", err)
	}
	a, err := s.Act(ctx, work.Retry, f, 10, "ops")
	if err != nil || a.Moved != 10 || len(a.Items) != 10 {
		t.Fatalf("the action: %+v, %v", a, err)
	}
	var histories int
	db.QueryRow(ctx, `SELECT count(*) FROM widgets.history WHERE detail = $1`, fmt.Sprintf("work action %d by ops", a.ID)).Scan(&histories)
	if histories != 10 {
		t.Fatalf("%d histories name the action, want 10", histories)
	}
	if h, err := work.History(ctx, db, "widgets", a.Items[3]); err != nil || len(h) != 1 || h[0].What != "retry" || h[0].Detail != fmt.Sprintf("work action %d by ops", a.ID) {
		t.Fatalf("the history of %s: %+v, %v", a.Items[3], h, err)
	}
	if c, err := s.DryRun(ctx, work.Retry, f); err != nil || c.N != 0 {
		t.Fatalf("after the action the dry run counts %d, %v", c.N, err)
	}
	log, err := s.Actions(ctx, "", 0, 10)
	if err != nil || len(log) != 2 {
		t.Fatalf("action log: %+v, %v", log, err)
	}
	if log[0].Outcome != "done" || log[0].Moved != 10 || log[0].Filter.Query != "timed out" || !strings.HasPrefix(log[1].Outcome, "refused: the dry run counted 11") {
		t.Fatalf("action log: %+v", log)
	}
	if _, err := s.DryRun(ctx, work.Resend, work.Filter{}); !errors.As(err, new(*work.NoVerbError)) {
		t.Fatalf("a verb no item takes: %v", err)
	}
}

// TestAPublisherFindsAndActsOnItsOwn: through the routes, a publisher's
// filter is its own, whatever it asks; a reader finds all but may not act.
func TestAPublisherFindsAndActsOnItsOwn(t *testing.T) {
	ctx := context.Background()
	s, db := newStore(t)
	if _, err := db.Exec(ctx, `INSERT INTO widgets.gears (state, owner) SELECT 'failed', CASE WHEN g <= 4 THEN 'alice' ELSE 'mallory' END FROM generate_series(1, 10) g`); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Handle(mux, slog.New(slog.DiscardHandler))
	h := work.MarkRoutes(httpauth.RoutesOf(mux))
	call := func(id apiauth.Identity, method, path string, q url.Values) (int, map[string]any) {
		r := httptest.NewRequest(method, path+"?"+q.Encode(), nil).WithContext(apiauth.WithCaller(ctx, id))
		w := httptest.NewRecorder()
		if ok, _ := httpauth.Allowed(id, h, r); !ok {
			return http.StatusForbidden, nil
		}
		h.ServeHTTP(w, r)
		var out map[string]any
		json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	alice := apiauth.Identity{Name: "alice", Roles: []apiauth.Role{apiauth.Publisher}}
	reader := apiauth.Identity{Name: "r", Roles: []apiauth.Role{apiauth.Reader}}
	if code, out := call(alice, "GET", "/v1/work", url.Values{"submitter": {"mallory"}}); code != 200 || len(out["items"].([]any)) != 4 {
		t.Fatalf("alice asking for mallory's: %d %v", code, out)
	}
	if code, out := call(reader, "GET", "/v1/work", nil); code != 200 || len(out["items"].([]any)) != 10 {
		t.Fatalf("a reader: %d %v", code, out)
	}
	if code, _ := call(reader, "POST", "/v1/work/retry", url.Values{"dry_run": {"true"}}); code != http.StatusForbidden {
		t.Fatalf("a reader acting: %d", code)
	}
	if code, out := call(alice, "POST", "/v1/work/retry", url.Values{"dry_run": {"true"}}); code != 200 || out["count"].(float64) != 4 {
		t.Fatalf("alice's dry run: %d %v", code, out)
	}
	if code, out := call(alice, "POST", "/v1/work/retry", url.Values{"confirm": {"4"}}); code != 200 || out["moved"].(float64) != 4 {
		t.Fatalf("alice's action: %d %v", code, out)
	}
	var left int
	db.QueryRow(ctx, `SELECT count(*) FROM widgets.gears WHERE owner = 'mallory' AND state = 'failed'`).Scan(&left)
	if left != 6 {
		t.Fatalf("mallory's failed gears: %d, want 6 untouched", left)
	}
	if code, _ := call(alice, "POST", "/v1/work/retry", nil); code != http.StatusBadRequest {
		t.Fatalf("an action without a count: %d", code)
	}
	if code, _ := call(alice, "POST", "/v1/work/frobnicate", url.Values{"dry_run": {"true"}}); code != http.StatusBadRequest {
		t.Fatalf("an unknown verb: %d", code)
	}
	if code, _ := call(reader, "GET", "/v1/work", url.Values{"older_than": {"yesterday"}}); code != http.StatusBadRequest {
		t.Fatalf("a bad age: %d", code)
	}
}

// TestAFailureIsRecordedOneWay: the failure model's bookkeeping, written
// once: each failure counts, the first one's time is kept, a transient
// cause backs off, and the third parks the unit with its reason (a
// permanent cause at once).
func TestAFailureIsRecordedOneWay(t *testing.T) {
	ctx := context.Background()
	_, db := newStore(t)
	if _, err := db.Exec(ctx, `INSERT INTO widgets.springs (id) VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	f := work.Failures{Table: "widgets.springs", Key: "id", Count: "failures", FirstFailedAt: "first_failed_at", NextAt: "next_at",
		Error: "err", ParkedAt: "parked_at", ParkedReason: "why", Text: strings.ToUpper}
	p := fault.Policy{Base: time.Minute, Max: time.Hour, Attempts: 3}
	fail := func(id int, cause error) fault.Decision {
		t.Helper()
		var d fault.Decision
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var err error
			d, err = f.Fail(ctx, tx, id, p, cause)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var firsts []time.Time
	for i := range 3 {
		d := fail(1, fault.Transient(errors.New("connection reset")))
		var n int
		var first time.Time
		var why *string
		db.QueryRow(ctx, `SELECT failures, first_failed_at, why FROM widgets.springs WHERE id = 1`).Scan(&n, &first, &why)
		firsts = append(firsts, first)
		if n != i+1 || d.Park != (i == 2) || (why != nil) != d.Park || !firsts[0].Equal(first) {
			t.Fatalf("failure %d: %+v, count %d, reason %v, first %v", i+1, d, n, why, firsts)
		}
	}
	if d := fail(2, fault.Permanent(errors.New("not audio"))); !d.Park {
		t.Fatalf("a permanent cause: %+v", d)
	}
	var why, stored string
	db.QueryRow(ctx, `SELECT why, err FROM widgets.springs WHERE id = 2`).Scan(&why, &stored)
	if !strings.Contains(why, "NOT AUDIO") || why != stored {
		t.Fatalf("parked with %q, error %q", why, stored)
	}
	// A unit counted when taken: its third attempt (counted by the
	// claim) parks it, and the count stays the claim's.
	f.Counted = true
	if _, err := db.Exec(ctx, `INSERT INTO widgets.springs (id, failures) VALUES (3, 3)`); err != nil {
		t.Fatal(err)
	}
	if d := fail(3, fault.Transient(errors.New("smtp: 451"))); !d.Park {
		t.Fatalf("the third counted attempt: %+v", d)
	}
	var n int
	db.QueryRow(ctx, `SELECT failures FROM widgets.springs WHERE id = 3`).Scan(&n)
	if n != 3 {
		t.Fatalf("a counted unit's count moved to %d", n)
	}
	// Bare columns (a pipeline that parks by a transition of its own, as
	// ingest does): the failure is recorded, and the unit backs off.
	bare := work.Failures{Table: "widgets.springs", Key: "id", Count: "failures", FirstFailedAt: "first_failed_at", NextAt: "next_at", Error: "err"}
	var d fault.Decision
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
		d, err = bare.Fail(ctx, tx, 3, fault.Policy{Base: time.Minute, Max: time.Hour}, errors.New("smtp: 452"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var next time.Time
	db.QueryRow(ctx, `SELECT failures, err, next_at FROM widgets.springs WHERE id = 3`).Scan(&n, &stored, &next)
	if d.Park || n != 4 || stored != "smtp: 452" || time.Until(next) < 30*time.Second {
		t.Fatalf("bare columns: %+v, count %d, error %q, next %v", d, n, stored, next)
	}
}
