// Package workman is the worker manager of bit-integrity-and-workman.txt on
// JetStream: it reads the high-priority queue first, up to 10 tasks at a
// time, and the low one only when high is empty; with both empty it waits,
// backing off exponentially from 1 to 8 minutes, and wakes at once when a
// task arrives. A pool of workers handles the tasks; each task's deadline is
// kept extended while its check reads (in-progress, for as long as bytes
// flow; AUDITOR_STALL_TIMEOUT ends a read that stalls), a finished task is
// acked, a failed one is nakked to the back of its queue, and after its
// third failure it goes to the dead-letter stream with its reason: all
// JetStream's own mechanisms, through pkg/bus.
package workman

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
)

// Config tunes the manager.
type Config struct {
	// Workers is the size of the pool.
	Workers int `env:"AUDITOR_WORKERS, default=4"`
	// Batch is the most tasks fetched at once (the spec's 10).
	Batch int `env:"AUDITOR_BATCH, default=10"`
	// BackoffMin and BackoffMax bound the wait when both queues are empty.
	BackoffMin time.Duration `env:"AUDITOR_IDLE_BACKOFF_MIN, default=1m"`
	// BackoffMax is the longest wait when idle.
	BackoffMax time.Duration `env:"AUDITOR_IDLE_BACKOFF_MAX, default=8m"`
	// FailureDelay is how long a failed task waits before it is tried again.
	FailureDelay time.Duration `env:"AUDITOR_FAILURE_DELAY, default=30s"`
	// StallTimeout ends a check whose read has made no progress this long.
	// A check that reads is kept in progress for as long as bytes flow (an
	// object of 100 GiB takes what it takes), never by a total bound.
	StallTimeout time.Duration `env:"AUDITOR_STALL_TIMEOUT, default=2m"`
}

// Hooks observe the manager (tests, metrics).
type Hooks struct {
	// Batch is called with the queue and size of every non-empty fetch.
	Batch func(queue string, n int)
	// Idle is called with each wait when both queues are empty.
	Idle func(wait time.Duration)
}

// MaxFailures is how many failures a task may have before it goes to the
// dead-letter stream (the spec's three).
const MaxFailures = events.AuditMaxFailures

// Failures keeps each task's failures apart from its deliveries: a planned
// retry (the outcome table's "retry later") is a delivery, not a failure,
// and must not spend the three failures a task has; nor a failure its
// check's attempts. Tasks are named by their message id.
type Failures interface {
	// Failures returns how many failures the task has had.
	Failures(ctx context.Context, id string) (int, error)
	// Failed records a failure of the task and returns how many it has had.
	Failed(ctx context.Context, id string, task *events.AuditTask, err error) (int, error)
	// Exhausted parks the task's object: its last failure was its last.
	Exhausted(ctx context.Context, id string, task *events.AuditTask, err error) error
	// Done forgets the task's failures: it succeeded or is done with.
	Done(ctx context.Context, id string) error
}

type attemptKey struct{}

// Attempt is the attempt of the check a handler runs (1-based): its
// deliveries less its failures. Outside a manager's handler it is 0.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// Manager runs the worker pool over the two queues.
type Manager struct {
	cfg   Config
	high  *bus.Subscription
	low   *bus.Subscription
	log   *slog.Logger
	hooks Hooks
	wake  chan struct{}
	sub   *nats.Subscription
	slots chan struct{}
	// freed is signalled when a worker finishes: the manager, waiting for
	// a free worker, takes the next task at once.
	freed chan struct{}
	wg    sync.WaitGroup
}

// New prepares a manager of the high and low consumers, handling each task
// with h. A handler error is a failure: the task is retried after
// FailureDelay, and on its third failure it is dead-lettered with the error
// as reason (and its object parked, through failures). A bus.RetryAfter
// result is a planned retry, not a failure; the manager wakes for it when
// it is due. A failure while a dependency is down is no failure: the
// consumer pauses. failures may be nil: then every delivery before the
// failure counts as one.
func New(ctx context.Context, b *bus.Bus, high, low events.Consumer, h bus.Handler[events.AuditTask], cfg Config, hooks Hooks, failures Failures, log *slog.Logger) (*Manager, error) {
	if cfg.Workers < 1 || cfg.Batch < 1 || cfg.BackoffMin <= 0 || cfg.BackoffMax < cfg.BackoffMin {
		return nil, fmt.Errorf("worker manager: workers %d, batch %d, backoff %s..%s", cfg.Workers, cfg.Batch, cfg.BackoffMin, cfg.BackoffMax)
	}
	m := &Manager{cfg: cfg, log: log, hooks: hooks, wake: make(chan struct{}, 1), slots: make(chan struct{}, cfg.Workers),
		freed: make(chan struct{}, 1)}
	handle := func(ctx context.Context, msg *bus.Message[events.AuditTask]) error {
		delivered := int(msg.Metadata.NumDelivered)
		failed := delivered - 1
		if failures != nil {
			failed = 0
			if delivered > 1 {
				n, err := failures.Failures(ctx, msg.Envelope.ID)
				if err != nil {
					return fmt.Errorf("failures of task %s: %w", msg.Envelope.ID, err)
				}
				failed = n
			}
		}
		err := h(context.WithValue(ctx, attemptKey{}, max(delivered-failed, 1)), msg)
		if d, ok := bus.RetryDelay(err); ok {
			// The redelivery comes after d with no publish to wake an idle
			// manager: wake it then, not at the end of its backoff.
			time.AfterFunc(d, m.Wake)
		}
		switch {
		case err == nil, errors.Is(err, fault.ErrPermanent), bus.IsRetryAfter(err):
			if failures != nil && failed > 0 && !bus.IsRetryAfter(err) {
				if derr := failures.Done(ctx, msg.Envelope.ID); derr != nil {
					log.WarnContext(ctx, "forget a task's failures", "task", msg.Envelope.ID, "err", derr)
				}
			}
			return err
		case b.CheckDependencies(ctx) != nil:
			// PostgreSQL or the blob store is down: not the task's
			// failure. Returned as it is, it pauses the consumer and the
			// task is handled again once the dependency is back.
			return err
		}
		n := failed + 1
		if failures != nil {
			var ferr error
			if n, ferr = failures.Failed(ctx, msg.Envelope.ID, msg.Event, err); ferr != nil {
				return errors.Join(err, ferr) // not counted: retried as a plain error
			}
		}
		if n >= MaxFailures {
			if failures != nil {
				if perr := failures.Exhausted(ctx, msg.Envelope.ID, msg.Event, err); perr != nil {
					return errors.Join(err, perr)
				}
			}
			return fault.Permanent(fmt.Errorf("failed %d times, last: %w", n, err))
		}
		log.WarnContext(ctx, "task failed; back of its queue", "object", msg.Event.Object, "failures", n, "delivery", delivered, "err", err)
		time.AfterFunc(cfg.FailureDelay, m.Wake)
		return bus.RetryAfter(cfg.FailureDelay)
	}
	var err error
	stall := bus.WithStallTimeout(cmp.Or(cfg.StallTimeout, 2*time.Minute))
	if m.high, err = bus.Consume(ctx, b, high, handle, bus.WithManualFetch(), stall); err != nil {
		return nil, err
	}
	if m.low, err = bus.Consume(ctx, b, low, handle, bus.WithManualFetch(), stall); err != nil {
		return nil, err
	}
	// Any task published on either queue wakes an idle manager.
	m.sub, err = b.Conn().Subscribe("audit.task.>", func(*nats.Msg) { m.Wake() })
	if err != nil {
		return nil, fmt.Errorf("subscribe to task arrivals: %w", err)
	}
	return m, nil
}

// Wake ends an idle wait at once.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run fetches and dispatches until ctx ends, then waits for the tasks in
// hand and stops.
func (m *Manager) Run(ctx context.Context) error {
	backoff := m.cfg.BackoffMin
	// rechecks are quick looks after a wake: the wake (a task published, on
	// a core subject) can come before the stream has stored the task, and
	// a fetch then finds nothing; without them the task waited a backoff.
	rechecks := 0
	for ctx.Err() == nil {
		free := m.waitFree(ctx)
		if free == 0 {
			break
		}
		n := m.take(ctx, m.high, "high", free)
		if n == 0 {
			n = m.take(ctx, m.low, "low", free)
		}
		if n > 0 {
			backoff = m.cfg.BackoffMin
			continue
		}
		if rechecks > 0 {
			rechecks--
			select {
			case <-ctx.Done():
			case <-m.wake:
				rechecks = wakeRechecks
			case <-time.After(wakeRecheck):
			}
			continue
		}
		if m.hooks.Idle != nil {
			m.hooks.Idle(backoff)
		}
		select {
		case <-ctx.Done():
		case <-m.wake:
			backoff = m.cfg.BackoffMin
			rechecks = wakeRechecks
		case <-time.After(backoff):
			backoff = min(backoff*2, m.cfg.BackoffMax)
		}
	}
	m.wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return errors.Join(m.sub.Unsubscribe(), m.high.Stop(sctx), m.low.Stop(sctx))
}

// After a wake, an empty fetch is tried again wakeRechecks times,
// wakeRecheck apart, before the manager backs off.
const (
	wakeRechecks = 5
	wakeRecheck  = 20 * time.Millisecond
)

// waitFree waits until at least one worker is free and returns how many
// are. It wakes when a worker finishes: it used to look every 10 ms, and
// with every worker busy on checks of a millisecond or two the workers sat
// idle most of each 10 ms (727 tasks/s with 8 workers).
func (m *Manager) waitFree(ctx context.Context) int {
	for len(m.slots) == cap(m.slots) {
		select {
		case <-ctx.Done():
			return 0
		case <-m.freed:
		}
	}
	return cap(m.slots) - len(m.slots)
}

// take fetches up to min(Batch, free) tasks from one queue without waiting
// and hands each to a worker.
func (m *Manager) take(ctx context.Context, s *bus.Subscription, queue string, free int) int {
	batch, err := s.Consumer().FetchNoWait(min(m.cfg.Batch, free))
	if err != nil {
		if ctx.Err() == nil {
			m.log.WarnContext(ctx, "fetch tasks", "queue", queue, "err", err)
		}
		return 0
	}
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		msgs = append(msgs, msg)
	}
	if len(msgs) > 0 && m.hooks.Batch != nil {
		m.hooks.Batch(queue, len(msgs))
	}
	for _, msg := range msgs {
		m.slots <- struct{}{}
		m.wg.Add(1)
		go func() {
			defer func() {
				<-m.slots
				select {
				case m.freed <- struct{}{}:
				default:
				}
				m.wg.Done()
			}()
			s.Process(msg)
		}()
	}
	return len(msgs)
}
