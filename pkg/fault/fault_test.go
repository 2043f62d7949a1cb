package fault_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/fault"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestMarksWinAndWrap(t *testing.T) {
	base := errors.New("boom")
	for _, c := range []struct {
		err  error
		want fault.Kind
		dep  string
	}{
		{base, fault.KindTransient, ""},
		{fault.Permanent(base), fault.KindPermanent, ""},
		{fmt.Errorf("store: %w", fault.Permanent(base)), fault.KindPermanent, ""},
		{fault.Outage(fault.BlobStore, base), fault.KindOutage, fault.BlobStore},
		{fmt.Errorf("get x: %w", fault.Outage(fault.BlobStore, base)), fault.KindOutage, fault.BlobStore},
		// The outermost mark wins: a caller may judge a missing object transient.
		{fault.Transient(fault.Permanent(base)), fault.KindTransient, ""},
		{context.DeadlineExceeded, fault.KindTransient, ""},
		{fmt.Errorf("publish: %w", nats.ErrNoResponders), fault.KindOutage, fault.NATS},
		{fmt.Errorf("publish: %w", nats.ErrConnectionClosed), fault.KindOutage, fault.NATS},
	} {
		if got := fault.Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %s, want %s", c.err, got, c.want)
		}
		if got := fault.DependencyOf(c.err); got != c.dep {
			t.Errorf("DependencyOf(%v) = %q, want %q", c.err, got, c.dep)
		}
	}
	if !errors.Is(fault.Permanent(base), fault.ErrPermanent) || errors.Is(fault.Outage("x", base), fault.ErrPermanent) {
		t.Error("errors.Is(ErrPermanent) must match exactly the permanent errors")
	}
	if fault.Permanent(nil) != nil || fault.Transient(nil) != nil || fault.Outage("x", nil) != nil {
		t.Error("marking nil must give nil")
	}
}

// TestPostgresDownIsAnOutage: a real PostgreSQL stopped under a pool; the
// query's error, and a new pool's, are outages of postgres, not the work's.
func TestPostgresDownIsAnOutage(t *testing.T) {
	pg := testenv.PrivatePostgres(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var one int
	if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `SELECT 1`)
	if err == nil {
		t.Fatal("query succeeded with PostgreSQL stopped")
	}
	if fault.Of(err) != fault.KindOutage || fault.DependencyOf(err) != fault.Postgres {
		t.Errorf("query with PostgreSQL stopped: %v classified %s (%q), want an outage of postgres", err, fault.Of(err), fault.DependencyOf(err))
	}
	// A duplicate key or a syntax error is the statement's own: transient
	// by default (its budget bounds it), never an outage.
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `SELEKT 1`)
	if err == nil || fault.IsOutage(err) {
		t.Errorf("syntax error: %v classified %s, want no outage", err, fault.Of(err))
	}
}

// TestOriginRefusedIsTransient: an origin server that refuses is the
// job's transient fault, not an outage of the service.
func TestOriginRefusedIsTransient(t *testing.T) {
	port := testenv.FreePort(t)
	_, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/x", port))
	if err == nil {
		t.Fatal("nothing listens there, yet the GET succeeded")
	}
	if fault.Of(err) != fault.KindTransient || !fault.IsNetwork(err) {
		t.Errorf("refused GET: %v classified %s (network %v), want transient network", err, fault.Of(err), fault.IsNetwork(err))
	}
}

func TestNATSClosedIsAnOutage(t *testing.T) {
	nc, err := nats.Connect(testenv.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	err = nc.Publish("x", nil)
	if fault.DependencyOf(err) != fault.NATS {
		t.Errorf("publish on a closed connection: %v classified %s (%q), want an outage of nats", err, fault.Of(err), fault.DependencyOf(err))
	}
}

func TestPolicyBacksOffAndParksOnBothBounds(t *testing.T) {
	p := fault.Policy{Base: time.Second, Max: 8 * time.Second, Attempts: 3, Budget: time.Hour}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 9: 8 * time.Second} {
		if got := p.Delay(n); got != want {
			t.Errorf("Delay(%d) = %s, want %s", n, got, want)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err := errors.New("connection reset by origin")
	// Three quick failures inside the budget: not parked (a burst is not a verdict).
	d := p.Decide(err, 3, t0, t0.Add(10*time.Second))
	if d.Park || !d.RetryAt.Equal(t0.Add(14*time.Second)) {
		t.Errorf("3 failures in 10 s: %+v, want a retry 4 s on", d)
	}
	// Failing for longer than the budget with enough attempts: parked, saying why.
	d = p.Decide(err, 5, t0, t0.Add(2*time.Hour))
	if !d.Park || d.Reason != "gave up after 5 failed attempts over 2h0m0s: connection reset by origin" {
		t.Errorf("5 failures over 2 h: %+v, want parked with the reason", d)
	}
	// Over the budget but only one attempt: not parked (an outage the checks missed).
	if d = p.Decide(err, 1, t0, t0.Add(2*time.Hour)); d.Park {
		t.Errorf("1 failure: parked %+v", d)
	}
	// Permanent: parked at once, reason as it is.
	if d = p.Decide(fault.Permanent(err), 1, time.Time{}, t0); !d.Park || d.Kind != fault.KindPermanent {
		t.Errorf("permanent: %+v, want parked", d)
	}
	// Outage: nothing spent.
	if d = p.Decide(fault.Outage(fault.Postgres, err), 99, t0, t0.Add(48*time.Hour)); d.Park || d.Kind != fault.KindOutage {
		t.Errorf("outage: %+v, want not parked", d)
	}
}

// TestGateClosesOnAnOutageAndOpensWhenItEnds: a daemon's failure with a
// dependency down closes the gate; Wait blocks until the probe passes.
func TestGateClosesOnAnOutageAndOpensWhenItEnds(t *testing.T) {
	var down atomic.Bool
	g := fault.NewGate(testenv.Logger(t), fault.Probe{Name: fault.BlobStore, Check: func(context.Context) error {
		if down.Load() {
			return errors.New("root missing")
		}
		return nil
	}})
	g.Interval = 10 * time.Millisecond
	ctx := context.Background()
	if g.Observe(ctx, errors.New("read failed")) {
		t.Fatal("a failure with every dependency up closed the gate")
	}
	down.Store(true)
	if g.Observe(ctx, fault.Permanent(errors.New("corrupt"))) {
		t.Fatal("a permanent failure is never an outage")
	}
	if !g.Observe(ctx, errors.New("read failed")) {
		t.Fatal("a failure with the blob store down did not close the gate")
	}
	if dep := fault.DependencyOf(g.Down()); dep != fault.BlobStore {
		t.Fatalf("gate down for %q, want the blob store", dep)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if err := g.Wait(wctx); err == nil {
		t.Fatal("Wait returned while the dependency is still down")
	}
	cancel()
	down.Store(false)
	wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.Wait(wctx); err != nil {
		t.Fatalf("gate did not open once the dependency answered: %v", err)
	}
	if g.Down() != nil {
		t.Fatal("gate still down")
	}
}
