package leader_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/leader"
	"github.com/archivist/archivist/pkg/store"
)

// TestOneReplicaLeadsALoop: of two replicas running a loop AsLeader, one
// runs it; when it stops, or its database session is killed, the other
// takes over, and the first's loop is stopped.
func TestOneReplicaLeadsALoop(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.DBURL(t)
	var running atomic.Int32
	var mu sync.Mutex
	leading := map[string]bool{}
	replica := func(name string) (context.CancelFunc, chan struct{}) {
		pool, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 4}, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		loop := leader.Elect(pool, "test-loop", 50*time.Millisecond, testenv.Logger(t), func(ctx context.Context) error {
			if n := running.Add(1); n > 1 {
				t.Errorf("%s leads while another does", name)
			}
			mu.Lock()
			leading[name] = true
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			leading[name] = false
			mu.Unlock()
			running.Add(-1)
			return nil
		})
		go func() { defer close(done); _ = loop(rctx) }()
		return cancel, done
	}
	leader := func() string {
		mu.Lock()
		defer mu.Unlock()
		for n, l := range leading {
			if l {
				return n
			}
		}
		return ""
	}
	waitLeader := func(not string) string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if l := leader(); l != "" && l != not {
				return l
			}
		}
		t.Fatalf("no replica other than %q took the lead", not)
		return ""
	}
	stopA, doneA := replica("a")
	stopB, doneB := replica("b")
	defer func() { stopA(); stopB(); <-doneA; <-doneB }()
	first := waitLeader("")
	time.Sleep(300 * time.Millisecond) // the other keeps asking, and waits
	if running.Load() != 1 {
		t.Fatalf("%d replicas lead", running.Load())
	}

	// The leader's session is killed (a lost node, a cut network): the
	// server frees its lock, it notices and stops, the other leads.
	admin, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 1}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	second := waitLeader(first)
	for deadline := time.Now().Add(5 * time.Second); running.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d replicas lead after the takeover", running.Load())
		}
	}

	// The new leader stops (a rolling update): the first leads again.
	if second == "a" {
		stopA()
		<-doneA
	} else {
		stopB()
		<-doneB
	}
	if l := waitLeader(second); l != first {
		t.Fatalf("%s leads, want %s", l, first)
	}
}

// TestLeadersLeaveThePoolToTheWork: a leader's lock lives in a session of
// its own, outside the service's pool. Three loops led on a pool of one
// connection each query through it; the leaders' sessions used to be the
// pool's connections, so the first leader took the only one and the
// others, and every loop's queries, waited forever (the auditor's four
// leaders held four of the soak's five).
func TestLeadersLeaveThePoolToTheWork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := store.Open(ctx, store.Config{URL: testenv.DBURL(t), MaxConns: 1}, "leaders")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	queried := make(chan string, 3)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, name := range []string{"one", "two", "three"} {
		loop := leader.Elect(pool, "pool-test-"+name, 50*time.Millisecond, testenv.Logger(t), func(ctx context.Context) error {
			var one int
			if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
				return err
			}
			queried <- name
			<-ctx.Done()
			return nil
		})
		wg.Add(1)
		go func() { defer wg.Done(); _ = loop(ctx) }()
	}
	timeout := time.After(20 * time.Second)
	for range 3 {
		select {
		case <-queried:
		case <-timeout:
			t.Fatalf("the loops led on a pool of one connection could not query it: the leaders hold it (%d acquired of %d)",
				pool.Stat().AcquiredConns(), pool.Stat().MaxConns())
		}
	}
}
