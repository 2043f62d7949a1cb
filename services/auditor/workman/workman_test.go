package workman_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/auditor/workman"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var fast = workman.Config{Workers: 1, Batch: 10, BackoffMin: 20 * time.Millisecond, BackoffMax: 160 * time.Millisecond, FailureDelay: 50 * time.Millisecond}

type run struct {
	b      *bus.Bus
	mu     sync.Mutex
	seen   []string
	cancel context.CancelFunc
	done   chan error
}

func (r *run) handled() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func enqueue(t *testing.T, b *bus.Bus, subject string, objects ...string) {
	t.Helper()
	var out []bus.Outgoing
	for _, o := range objects {
		env, err := events.New("test", &events.AuditTask{Object: o, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bus.Outgoing{Subject: subject, Envelope: env})
	}
	if err := b.PublishBatch(context.Background(), out); err != nil {
		t.Fatal(err)
	}
}

// start runs a manager whose handler records each object and then calls h.
func start(t *testing.T, b *bus.Bus, cfg workman.Config, hooks workman.Hooks, high, low events.Consumer, h func(o string, delivery uint64) error) *run {
	t.Helper()
	r := &run{b: b, done: make(chan error, 1)}
	handler := func(ctx context.Context, m *bus.Message[events.AuditTask]) error {
		r.mu.Lock()
		r.seen = append(r.seen, m.Event.Object)
		r.mu.Unlock()
		if h != nil {
			return h(m.Event.Object, m.Metadata.NumDelivered)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := workman.New(ctx, b, high, low, handler, cfg, hooks, nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	r.cancel = cancel
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("manager stop: %v", err)
		}
	})
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, what, cond)
}

func TestHighBeforeLowInBatchesOfTen(t *testing.T) {
	b := testenv.Bus(t, "auditor")
	var low, high []string
	for i := range 5 {
		low = append(low, fmt.Sprintf("low-%d", i))
	}
	for i := range 25 {
		high = append(high, fmt.Sprintf("high-%02d", i))
	}
	enqueue(t, b, events.SubjectAuditTaskLow, low...)
	enqueue(t, b, events.SubjectAuditTaskHigh, high...)
	var mu sync.Mutex
	var batches []string
	cfg := fast
	cfg.Workers = 10
	r := start(t, b, cfg, workman.Hooks{Batch: func(q string, n int) { mu.Lock(); batches = append(batches, fmt.Sprintf("%s:%d", q, n)); mu.Unlock() }},
		events.AuditorHigh, events.AuditorLow, nil)
	waitFor(t, "all 30 tasks", func() bool { return len(r.handled()) == 30 })
	// Every high task is handed out before any low one (the last high
	// batch and the first low one may then run side by side on different
	// workers, so handling order is not asserted: under load it can finish
	// a low task before a high one handed out earlier).
	mu.Lock()
	defer mu.Unlock()
	seenLow := false
	for _, bt := range batches {
		if strings.HasPrefix(bt, "low") {
			seenLow = true
		} else if seenLow {
			t.Fatalf("a high batch handed out after a low one: %v", batches)
		}
	}
	for _, bt := range batches {
		var q string
		var n int
		fmt.Sscanf(strings.Replace(bt, ":", " ", 1), "%s %d", &q, &n)
		if n > 10 {
			t.Errorf("batch %s larger than 10", bt)
		}
	}
	if len(batches) == 0 || batches[0] != "high:10" {
		t.Errorf("batches %v: the first should be 10 high tasks", batches)
	}
}

func TestDeadlineKeptExtendedDuringASlowTask(t *testing.T) {
	b := testenv.Bus(t, "auditor")
	high := events.AuditorHigh
	high.Config.AckWait = time.Second
	enqueue(t, b, events.SubjectAuditTaskHigh, "slow")
	r := start(t, b, fast, workman.Hooks{}, high, events.AuditorLow, func(string, uint64) error {
		time.Sleep(3 * time.Second) // three ack waits: a slow checksum
		return nil
	})
	waitFor(t, "the slow task", func() bool { return len(r.handled()) == 1 })
	time.Sleep(3500 * time.Millisecond)
	if got := r.handled(); len(got) != 1 {
		t.Errorf("the slow task was delivered %d times", len(got))
	}
}

func TestFailedTaskGoesToTheBackOfItsQueue(t *testing.T) {
	b := testenv.Bus(t, "auditor")
	enqueue(t, b, events.SubjectAuditTaskHigh, "a", "b", "c")
	cfg := fast
	cfg.FailureDelay = time.Second // long enough for b and c to go first even on a loaded machine
	r := start(t, b, cfg, workman.Hooks{}, events.AuditorHigh, events.AuditorLow, func(o string, delivery uint64) error {
		if o == "a" && delivery == 1 {
			return errors.New("blob store timed out")
		}
		return nil
	})
	waitFor(t, "four deliveries", func() bool { return len(r.handled()) == 4 })
	if got := strings.Join(r.handled(), ","); got != "a,b,c,a" {
		t.Errorf("order %s, want a,b,c,a", got)
	}
}

func TestThirdFailureIsDeadLetteredWithItsReason(t *testing.T) {
	b := testenv.Bus(t, "auditor")
	enqueue(t, b, events.SubjectAuditTaskHigh, "cursed")
	r := start(t, b, fast, workman.Hooks{}, events.AuditorHigh, events.AuditorLow, func(string, uint64) error {
		return errors.New("checksum stream broke")
	})
	waitFor(t, "three deliveries", func() bool { return len(r.handled()) == 3 })
	var dl []bus.DeadLetter
	waitFor(t, "the dead letter", func() bool {
		var err error
		dl, err = b.DeadLetters(context.Background(), 0, 10)
		return err == nil && len(dl) == 1
	})
	if !strings.Contains(dl[0].Reason, "failed 3 times") || !strings.Contains(dl[0].Reason, "checksum stream broke") || dl[0].Stream != events.StreamAuditHigh {
		t.Errorf("dead letter %+v", dl[0])
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(r.handled()); n != 3 {
		t.Errorf("%d deliveries, want 3", n)
	}
}

// TestOutageSpendsNoFailures: the soak test's finding. While PostgreSQL
// restarted, every check failed and the manager's own budget (fail three
// times, then dead-letter) dead-lettered thousands of tasks. A failure while
// the dependency check fails is not the task's: the consumer pauses and the
// task is handled again once the dependency is back, dead-lettering none.
func TestOutageSpendsNoFailures(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	b := testenv.Bus(t, "auditor", bus.WithDependencyCheck(func(context.Context) error {
		if down.Load() {
			return errors.New("postgres: connection refused")
		}
		return nil
	}))
	enqueue(t, b, events.SubjectAuditTaskHigh, "a", "b")
	var failures atomic.Int64
	r := start(t, b, fast, workman.Hooks{}, events.AuditorHigh, events.AuditorLow, func(string, uint64) error {
		if down.Load() {
			failures.Add(1)
			return errors.New("read index and audit log: connection refused")
		}
		return nil
	})
	waitFor(t, "the outage to be met", func() bool { return failures.Load() >= 1 })
	time.Sleep(2 * time.Second) // many FailureDelays, several pause probes
	down.Store(false)
	waitFor(t, "both tasks done", func() bool {
		h := r.handled()
		return slices.Contains(h, "a") && slices.Contains(h, "b") && int64(len(h)) >= failures.Load()+2
	})
	time.Sleep(300 * time.Millisecond)
	if dl, err := b.DeadLetters(context.Background(), 0, 10); err != nil || len(dl) != 0 {
		t.Errorf("dead letters after an outage: %+v %v, want none", dl, err)
	}
}

func TestIdleBackoffGrowsToItsCapAndResetsOnWork(t *testing.T) {
	b := testenv.Bus(t, "auditor")
	var mu sync.Mutex
	var waits []time.Duration
	r := start(t, b, fast, workman.Hooks{Idle: func(d time.Duration) { mu.Lock(); waits = append(waits, d); mu.Unlock() }},
		events.AuditorHigh, events.AuditorLow, nil)
	waitFor(t, "the backoff to reach its cap", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(waits) >= 6
	})
	mu.Lock()
	got := append([]time.Duration(nil), waits[:6]...)
	mu.Unlock()
	want := []time.Duration{20, 40, 80, 160, 160, 160}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	// A task arriving wakes the manager at once and resets the backoff.
	mu.Lock()
	waits = nil
	mu.Unlock()
	enqueue(t, b, events.SubjectAuditTaskLow, "new")
	waitFor(t, "the new task", func() bool { return len(r.handled()) == 1 })
	waitFor(t, "the next idle wait", func() bool { mu.Lock(); defer mu.Unlock(); return len(waits) >= 1 })
	mu.Lock()
	defer mu.Unlock()
	if waits[0] != 20*time.Millisecond {
		t.Errorf("after work the backoff restarted at %s, want 20ms", waits[0])
	}
}

// memFailures is an in-memory workman.Failures.
type memFailures struct {
	mu        sync.Mutex
	n         map[string]int
	exhausted []string
}

func (f *memFailures) Failures(_ context.Context, id string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[id], nil
}

func (f *memFailures) Failed(_ context.Context, id string, _ *events.AuditTask, _ error) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n[id]++
	return f.n[id], nil
}

func (f *memFailures) Exhausted(_ context.Context, _ string, t *events.AuditTask, _ error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exhausted = append(f.exhausted, t.Object)
	return nil
}

func (f *memFailures) Done(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.n, id)
	return nil
}

// TestRetryLaterSpendsNoFailures: "retry later" and real failures shared one
// 3-delivery budget, so a check that had to wait twice was dead-lettered on
// its first failure. Now a task retried later twice (its check seeing
// attempts 1, 2, 3) and then failing is dead-lettered on its third failure,
// after five deliveries, and its object is parked. The manager, idle with a
// one-minute backoff, wakes for each planned retry when it is due.
func TestRetryLaterSpendsNoFailures(t *testing.T) {
	b := testenv.Bus(t, "auditor")
	enqueue(t, b, events.SubjectAuditTaskHigh, "waits")
	cfg := fast
	cfg.BackoffMin, cfg.BackoffMax = time.Minute, time.Minute
	f := &memFailures{n: map[string]int{}}
	var mu sync.Mutex
	var attempts []int
	r := &run{b: b, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := workman.New(ctx, b, events.AuditorHigh, events.AuditorLow, func(ctx context.Context, msg *bus.Message[events.AuditTask]) error {
		mu.Lock()
		attempts = append(attempts, workman.Attempt(ctx))
		n := len(attempts)
		mu.Unlock()
		if n <= 2 {
			return bus.RetryAfter(100 * time.Millisecond)
		}
		return errors.New("checksum stream broke")
	}, cfg, workman.Hooks{}, f, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- m.Run(ctx) }()
	defer func() { cancel(); <-r.done }()
	var dl []bus.DeadLetter
	waitFor(t, "the dead letter", func() bool {
		dl, err = b.DeadLetters(context.Background(), 0, 10)
		return err == nil && len(dl) == 1
	})
	mu.Lock()
	got := fmt.Sprint(attempts)
	mu.Unlock()
	if got != "[1 2 3 3 3]" {
		t.Errorf("check attempts %s, want [1 2 3 3 3]: two retries later, then three failures of attempt 3", got)
	}
	if !strings.Contains(dl[0].Reason, "failed 3 times") || dl[0].Deliveries != 5 {
		t.Errorf("dead letter %+v, want failed 3 times after 5 deliveries", dl[0])
	}
	if fmt.Sprint(f.exhausted) != "[waits]" {
		t.Errorf("objects parked %v, want [waits]", f.exhausted)
	}
}
