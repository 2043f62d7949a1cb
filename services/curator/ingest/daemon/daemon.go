package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// daemon claims entities in one state, lowest priority number first, and
// works up to cap(sem) of them at once.
type daemon struct {
	store    *ingest.Store
	entity   ingest.Entity
	state    ingest.State
	work     Work
	interval time.Duration
	log      *slog.Logger
	wake     chan struct{}
	claims   *pgxpool.Pool
	// shared are the process's claim slots every state takes first
	// (INGEST_MAX_CLAIMS), and reserved this state's own, taken when none
	// is free: a slot is held from before a claim until its release (or
	// its carry to another state), so long downloads and stores can take
	// every shared slot but never a reporting's or a notify's own.
	reserved chan struct{}
	shared   chan struct{}
	sem      chan struct{} // a slot per entity in hand
	// share is the most of sem one depositor's entities hold at once
	// while another depositor has work waiting in the state (contested,
	// as the last listing found); inHand counts them by depositor (under
	// mu). Alone, a depositor may use every slot: the share is a floor
	// for each, not a ceiling when no one else waits.
	share     int
	mu        sync.Mutex
	inHand    map[string]int
	contested bool
	next      func(ingest.State) *daemon // the daemon of another state of the entity
	// held is what this process has claimed, by lock key, shared by all
	// daemons: a listing skips it without asking PostgreSQL (a job carried
	// from state to state is listed by each state's daemon in turn).
	held *sync.Map
	// policy bounds an entity's attempts at one state: the backoff after a
	// failed one, and when it is failed (INGEST_MAX_ATTEMPTS claims, and,
	// if an attempt failed with an error, INGEST_RETRY_BUDGET since).
	policy fault.Policy
	// gate pauses the daemon while a dependency is down (nil: never).
	gate *fault.Gate
	// stepTimeout bounds one attempt's work (0: none); jobTimeout fails an
	// entity whose work over all attempts and states exceeds it (0: none).
	stepTimeout, jobTimeout time.Duration
}

func (d *daemon) notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *daemon) run(ctx context.Context) {
	sem := d.sem
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		// While a dependency is down nothing is claimed: no attempt spent.
		if d.gate.Wait(ctx) != nil {
			return
		}
		claimed := 0
		paused, err := d.store.Paused(ctx)
		if err == nil && !paused {
			ids, err := d.candidates(ctx)
			d.sawWaiting(ids)
			if err != nil && ctx.Err() == nil && !d.gate.Observe(ctx, err) {
				d.log.ErrorContext(ctx, "ingest: list", "entity", d.entity, "state", d.state, "err", err)
			}
			for _, cand := range ids {
				id, who := cand.ID, cand.Submitter
				key := lockKey(d.entity, id)
				if _, mine := d.held.Load(key); mine {
					continue
				}
				// A depositor holding its share waits for one of its
				// own to end: the rest is the others'.
				if !d.admit(who) {
					continue
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					d.leave(who)
					return
				}
				slot := d.takeSlot(ctx)
				if slot == nil {
					<-sem
					d.leave(who)
					return
				}
				c, err := tryClaim(ctx, d.claims, d.entity, id, d.state)
				if err != nil || c == nil {
					<-sem
					d.leave(who)
					<-slot
					continue
				}
				c.Submitter = who
				claimed++
				d.held.Store(key, true)
				wg.Add(1)
				go func() {
					defer wg.Done()
					next, slot := carry(ctx, c, d, slot)
					<-slot // the claim is released
					d.held.Delete(key)
					if next != nil {
						// Left for that state's daemon, now that it can claim it.
						next.notify()
					}
				}()
			}
		}
		if claimed > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-time.After(d.interval):
		}
	}
}

// candidate is an entity a daemon may claim, and its depositor.
type candidate struct {
	ID        int64
	Submitter string
}

// candidates lists the entities due in the daemon's state, most urgent
// first, at most perDepositor of any one depositor: a depositor with
// thousands waiting does not push the others off the list (each
// depositor's are found through the (state, submitter, ...) index, one
// seek per depositor with work in the state).
func (d *daemon) candidates(ctx context.Context) ([]candidate, error) {
	table, cols, order, outer := ingest.Table(d.entity), "id, priority", "priority, id", "c.priority, c.id"
	if d.entity == ingest.Batch {
		cols, order, outer = "id", "id", "c.id"
	}
	q := `WITH RECURSIVE s AS (
			(SELECT submitter FROM ` + table + ` WHERE state = $1 ORDER BY submitter LIMIT 1)
			UNION ALL
			SELECT (SELECT t.submitter FROM ` + table + ` t WHERE t.state = $1 AND t.submitter > s.submitter ORDER BY t.submitter LIMIT 1)
			FROM s WHERE s.submitter IS NOT NULL)
		SELECT c.id, s.submitter FROM s CROSS JOIN LATERAL (
			SELECT ` + cols + ` FROM ` + table + ` t WHERE t.state = $1 AND t.submitter = s.submitter AND t.next_attempt_at <= now()
			ORDER BY ` + order + ` LIMIT $2) c
		WHERE s.submitter IS NOT NULL ORDER BY ` + outer + ` LIMIT 64`
	rows, err := d.store.DB.Query(ctx, q, d.state, perDepositor)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[candidate])
}

// perDepositor is the most of one depositor's entities one listing holds.
const perDepositor = 16

// sawWaiting notes whether the depositors of a listing's entities, and
// those in hand, are more than one: then each holds at most its share.
func (d *daemon) sawWaiting(cands []candidate) {
	d.mu.Lock()
	defer d.mu.Unlock()
	who := map[string]bool{}
	for _, c := range cands {
		who[c.Submitter] = true
	}
	for s := range d.inHand {
		who[s] = true
	}
	d.contested = len(who) > 1
}

// admit counts an entity of depositor who in hand, unless the depositor
// holds its share of the daemon's concurrency already while others wait.
func (d *daemon) admit(who string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	limit := d.share
	if limit <= 0 || !d.contested {
		limit = cap(d.sem)
	}
	if d.inHand[who] >= limit {
		return false
	}
	if d.inHand == nil {
		d.inHand = map[string]int{}
	}
	d.inHand[who]++
	return true
}

// leave counts an entity of depositor who out of hand.
func (d *daemon) leave(who string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inHand[who]--; d.inHand[who] <= 0 {
		delete(d.inHand, who)
	}
}

// takeSlot waits for a claim slot: a shared one if free, else the
// daemon's own; nil when ctx ends. Release it by receiving from it.
func (d *daemon) takeSlot(ctx context.Context) chan struct{} {
	if slot := d.trySlot(); slot != nil {
		return slot
	}
	select {
	case d.shared <- struct{}{}:
		return d.shared
	case d.reserved <- struct{}{}:
		return d.reserved
	case <-ctx.Done():
		return nil
	}
}

// trySlot is takeSlot without waiting (nil if no slot is free).
func (d *daemon) trySlot() chan struct{} {
	select {
	case d.shared <- struct{}{}:
		return d.shared
	default:
	}
	select {
	case d.reserved <- struct{}{}:
		return d.reserved
	default:
		return nil
	}
}

// carry works the claimed entity in cur (whose concurrency slot and claim
// slot it holds) and, while the next state's daemon has a free slot of
// each and the queue is not paused, goes on there under the same claim: a
// job moves through its states without being listed and claimed again at
// each, and each state's concurrency and claim slots still bound how many
// are in it (a shared claim slot goes along; a state's own is exchanged
// for the next state's). It releases the concurrency slot and the claim,
// and returns the daemon of the state it left the entity in for lack of a
// slot (nil if none) and the claim slot to release.
func carry(ctx context.Context, c *Claim, cur *daemon, slot chan struct{}) (*daemon, chan struct{}) {
	defer c.Release()
	who := c.Submitter
	for {
		to, ok := cur.handle(ctx, c)
		var nd *daemon
		if ok && cur.next != nil {
			nd = cur.next(to)
		}
		if nd == nil {
			<-cur.sem
			cur.leave(who)
			return nil, slot
		}
		// On under the same claim while the next state has a slot, and
		// room in its depositor's share.
		if ctx.Err() == nil && !cur.store.PausedNow() && nd.admit(who) {
			select {
			case nd.sem <- struct{}{}:
				next := slot
				if slot != cur.shared {
					if next = nd.trySlot(); next == nil {
						<-nd.sem
						nd.leave(who)
						break
					}
				}
				<-cur.sem
				cur.leave(who)
				if next != slot {
					<-slot
					slot = next
				}
				if err := c.countAttempt(ctx, to); err != nil {
					<-nd.sem
					nd.leave(who)
					return nd, slot // moved meanwhile, or not counted: a pass of nd takes it
				}
				cur = nd
				continue
			default:
				nd.leave(who)
			}
		}
		<-cur.sem
		cur.leave(who)
		return nd, slot
	}
}

// handle works the claimed entity and makes the transition; it returns
// the state reached, and false if there was none.
func (d *daemon) handle(ctx context.Context, c *Claim) (ingest.State, bool) {
	log := d.log.With(string(d.entity), c.ID, "state", d.state, "attempt", c.Attempts)
	var out Outcome
	var err error
	var worked time.Duration // this attempt's work
	_, canFail := ingest.AllowedBy(d.entity, d.state, ingest.Failed, ingest.Daemon)
	switch {
	case canFail && d.poisoned(c):
		// Poison: every attempt failed for longer than the budget, or its
		// worker crashed or hung each time.
		why := c.LastError
		if why == "" {
			why = "its worker crashed or hung each time"
		}
		out = Outcome{To: ingest.Failed, Detail: fmt.Sprintf("gave up after %d attempts in %s (INGEST_MAX_ATTEMPTS): %s", c.Attempts-1, d.state, why)}
	case canFail && d.jobTimeout > 0 && c.Worked > d.jobTimeout:
		out = Outcome{To: ingest.Failed, Detail: fmt.Sprintf("gave up in %s: worked on for %s over its attempts, more than INGEST_JOB_TIMEOUT (%s)",
			d.state, c.Worked.Round(time.Second), d.jobTimeout)}
	default:
		wctx, span := d.span(ctx, c)
		start := time.Now()
		out, err = d.safeWork(wctx, c)
		worked = time.Since(start)
		c.Worked += worked
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	c.job = nil
	if errors.Is(err, ErrStay) {
		// Waiting (for room, say) is no failed attempt: not counted; and
		// the entity is not listed again for an interval, so that a daemon
		// whose every candidate waits sleeps instead of claiming them
		// again at once, pass after pass.
		if uerr := c.wait(ctx, d.state, d.interval); uerr != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "ingest: uncount a waiting attempt", "err", uerr)
		}
		return "", false
	}
	if ctx.Err() != nil {
		return "", false
	}
	if errors.Is(err, ErrFenced) {
		// Another worker holds it: nothing is recorded, its work is its.
		log.WarnContext(ctx, "ingest: claim lost while working; the work is left to its new holder", "err", err)
		return "", false
	}
	if err != nil && (fault.IsOutage(err) || d.gate.Observe(ctx, err)) {
		// Not the entity's fault: its attempt is taken back, and the
		// daemons pause until the dependency answers again.
		log.WarnContext(ctx, "ingest: a dependency is down; the attempt waits", "err", err)
		if uerr := c.wait(ctx, d.state, 0); uerr != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "ingest: uncount an attempt", "err", uerr)
		}
		return "", false
	}
	if err != nil && fault.IsPermanent(err) {
		if _, canFail := ingest.AllowedBy(d.entity, d.state, ingest.Failed, ingest.Daemon); canFail {
			out, err = Outcome{To: ingest.Failed, Detail: err.Error()}, nil
		}
	}
	if err != nil {
		log.ErrorContext(ctx, "ingest: work failed; it will be tried again after a backoff", "err", err)
		if berr := c.backOff(ctx, d.state, d.policy, err.Error(), worked); berr != nil {
			log.ErrorContext(ctx, "ingest: record the failed attempt", "err", berr)
		}
		return "", false
	}
	to, detail := out.To, out.Detail
	if worked > 0 {
		// The move keeps the work's time too (one statement still).
		out.Set.Worked += worked
	}
	// The transition runs on the claim's own connection: a worker never
	// needs a second connection to finish what it holds.
	var row *ingest.JobRow
	if d.entity == ingest.Job {
		row = &ingest.JobRow{}
	}
	// Fenced: the move happens only while the claim holds.
	err = d.store.MoveOnRow(ctx, c.conn, d.entity, c.ID, d.state, to, ingest.Daemon, detail, out.Set, out.Apply, row, c.Epoch)
	if err != nil {
		if errors.Is(err, ingest.ErrMoved) {
			log.InfoContext(ctx, "ingest: moved by someone else meanwhile")
			return "", false
		}
		log.ErrorContext(ctx, "ingest: transition", "to", to, "err", err)
		// A failed attempt too (a manifest streamed in the move's
		// transaction that failed, a lost connection): it backs off and
		// counts. A move that committed left the state: nothing is written.
		if d.gate.Observe(ctx, err) {
			return "", false // the database is out: the claim's session has gone
		}
		if berr := c.backOff(ctx, d.state, d.policy, fmt.Sprintf("move to %s: %v", to, err), worked); berr != nil {
			log.ErrorContext(ctx, "ingest: record the failed attempt", "err", berr)
		}
		return "", false
	}
	c.job = row
	d.store.Implied(d.entity, to)
	if to == ingest.Failed {
		log.WarnContext(ctx, "ingest: failed", "reason", detail)
	} else {
		log.DebugContext(ctx, "ingest: moved", "to", to)
	}
	return to, true
}

// poisoned reports whether an entity has had its attempts at its state:
// INGEST_MAX_ATTEMPTS claims and, once an attempt failed with an error,
// INGEST_RETRY_BUDGET since (claims whose workers crashed or hung, with no
// error, count by number alone).
func (d *daemon) poisoned(c *Claim) bool {
	if d.policy.Attempts <= 0 || c.Attempts <= d.policy.Attempts {
		return false
	}
	p := d.policy
	if c.FirstFailed.IsZero() {
		p.Budget = 0
	}
	return p.Decide(errors.New(c.LastError), c.Attempts-1, c.FirstFailed, time.Now()).Park
}

// tracer makes the ingest steps' spans.
var tracer = otel.Tracer("github.com/archivist/archivist/services/curator/ingest")

// span starts the span of a step's work in the trace its batch kept (a
// span only where this process records, or a trace was kept), so that what
// the step publishes (archive.object.recorded) continues it to the auditor
// and the indexer.
func (d *daemon) span(ctx context.Context, c *Claim) (context.Context, trace.Span) {
	ctx = telemetry.WithTraceparent(ctx, c.traceparent)
	if !telemetry.Tracing() && c.traceparent == "" {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := tracer.Start(ctx, fmt.Sprintf("ingest %s %s", d.entity, d.state))
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("archivist.ingest."+string(d.entity), c.ID), attribute.Int("archivist.ingest.attempt", c.Attempts))
	}
	return ctx, span
}

// safeWork runs the state's work, turning a panic into an error: the
// attempt counts, and a job that panics its worker every time is failed
// after INGEST_MAX_ATTEMPTS instead of taking down every curator.
func (d *daemon) safeWork(ctx context.Context, c *Claim) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.ErrorContext(ctx, "ingest: work panicked", string(d.entity), c.ID, "state", d.state, "panic", r, "stack", string(debug.Stack()))
			out, err = Outcome{}, fmt.Errorf("panic: %v", r)
		}
	}()
	if d.stepTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.stepTimeout)
		defer cancel()
		defer func() {
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(context.Cause(ctx), ErrFenced) {
				err = fmt.Errorf("the %s step took longer than INGEST_STEP_TIMEOUT (%s): %w", d.state, d.stepTimeout, err)
			}
		}()
	}
	return d.work(context.WithValue(ctx, claimKey{}, c), c)
}

// String names the daemon.
func (d *daemon) String() string { return fmt.Sprintf("%s-%s", d.entity, d.state) }
