package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/migrations"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bundle is a test's database, store and pending jobs.
type bundle struct {
	db    *pgxpool.Pool
	store *ingest.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.DB(t, migrations.Schema)
	return &bundle{db: db, store: ingest.NewStore(db)}
}

// jobs inserts n pending jobs of depositor who and returns their ids.
func (b *bundle) jobs(t *testing.T, who string, n int) []int64 {
	t.Helper()
	batch := ingesttest.NewBatch(t, b.db, ingesttest.Batch{Submitter: who})
	var ids []int64
	for range n {
		id := ingesttest.NewJob(t, b.db, ingesttest.Job{Batch: batch, State: "pending", Submitter: who})
		ids = append(ids, id)
	}
	return ids
}

// run runs set until the test ends.
func run(t *testing.T, set *daemon.Set) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { set.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// states counts the jobs by state.
func (b *bundle) states(t *testing.T) map[ingest.State]int {
	t.Helper()
	rows, err := b.db.Query(context.Background(), `SELECT state, count(*) FROM curator.jobs GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[ingest.State]int{}
	for rows.Next() {
		var s ingest.State
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

var quick = daemon.SetConfig{Interval: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond, MaxAttempts: 3,
	Concurrency: 4, MaxClaims: 4, DepositorShare: 50}

// TestDaemonsMoveAndCarryJobs: each state's work decides the move, the
// columns it sets are written with it, and a job goes on to the next
// state under the same claim (its work sees the row the last move left)
// while that state has room; every move is in the history.
func TestDaemonsMoveAndCarryJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := append(b.jobs(t, "alice", 15), b.jobs(t, "bob", 5)...)
	set, err := daemon.NewSet(b.store, quick, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var carried atomic.Int64
	prio := 7
	set.Add(ingest.Job, ingest.Pending, func(ctx context.Context, c *daemon.Claim) (daemon.Outcome, error) {
		return daemon.Outcome{To: ingest.Estimating, Detail: "acquired", Set: ingest.Columns{Priority: &prio}}, nil
	})
	set.Add(ingest.Job, ingest.Estimating, func(ctx context.Context, c *daemon.Claim) (daemon.Outcome, error) {
		if j := c.Job(); j != nil {
			if j.Priority != 7 || j.ID != c.ID {
				return daemon.Outcome{}, fmt.Errorf("carried with the row %+v", j)
			}
			carried.Add(1)
		}
		return daemon.Outcome{To: ingest.Provisioning, Detail: "estimated"}, nil
	})
	run(t, set)
	testenv.Eventually(t, 30*time.Second, "every job provisioning", func() bool { return b.states(t)[ingest.Provisioning] == len(ids) })

	var moves, prios int
	if err := b.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM curator.ingest_history WHERE entity = 'job' AND entity_id = ANY($1) AND by = 'daemon'),
		(SELECT count(*) FROM curator.jobs WHERE priority = 7)`, ids).Scan(&moves, &prios); err != nil {
		t.Fatal(err)
	}
	if moves != 2*len(ids) || prios != len(ids) {
		t.Errorf("%d moves in the history, %d jobs at priority 7; want %d and %d", moves, prios, 2*len(ids), len(ids))
	}
	if carried.Load() == 0 {
		t.Errorf("no job was carried from pending to estimating under its claim")
	}
}

// TestFailedWorkIsRetriedThenFailed: an attempt that errs backs off and is
// tried again, and after INGEST_MAX_ATTEMPTS the job is failed with its
// last error; a panic is such an attempt; a permanent error fails the job
// at once; a wait (ErrStay) and a dependency's outage count no attempt.
func TestFailedWorkIsRetriedThenFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.jobs(t, "alice", 5)
	flaky, panics, permanent, waits, outage := ids[0], ids[1], ids[2], ids[3], ids[4]
	var mu sync.Mutex
	calls := map[int64]int{}
	set, err := daemon.NewSet(b.store, quick, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	set.Add(ingest.Job, ingest.Pending, func(ctx context.Context, c *daemon.Claim) (daemon.Outcome, error) {
		mu.Lock()
		calls[c.ID]++
		n := calls[c.ID]
		mu.Unlock()
		switch c.ID {
		case flaky:
			return daemon.Outcome{}, fmt.Errorf("origin said 500 (call %d)", n)
		case panics:
			panic("a corrupt payload")
		case permanent:
			return daemon.Outcome{}, fault.Permanent(errors.New("the manifest is not checkm"))
		case waits, outage:
			if n <= 6 { // more than MaxAttempts, none counted
				if c.ID == outage {
					return daemon.Outcome{}, fault.Outage("blob store", errors.New("connection refused"))
				}
				return daemon.Outcome{}, daemon.ErrStay
			}
		}
		return daemon.Outcome{To: ingest.Estimating}, nil
	})
	run(t, set)
	testenv.Eventually(t, 30*time.Second, "three failed and two moved on", func() bool {
		s := b.states(t)
		return s[ingest.Failed] == 3 && s[ingest.Estimating] == 2
	})
	reason := func(id int64) string {
		var r string
		if err := b.db.QueryRow(context.Background(), `SELECT error FROM curator.jobs WHERE id = $1`, id).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := reason(flaky); !strings.Contains(r, "gave up after 3 attempts in pending") || !strings.Contains(r, "origin said 500 (call 3)") {
		t.Errorf("the flaky job failed with %q; want its attempts and its last error", r)
	}
	if r := reason(panics); !strings.Contains(r, "panic: a corrupt payload") {
		t.Errorf("the panicking job failed with %q", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if r := reason(permanent); !strings.Contains(r, "the manifest is not checkm") || calls[permanent] != 1 {
		t.Errorf("the permanent error: failed with %q after %d calls; want at once, with the error", r, calls[permanent])
	}
	if calls[flaky] != 3 {
		t.Errorf("the flaky job was worked %d times, want 3 (INGEST_MAX_ATTEMPTS)", calls[flaky])
	}
}
