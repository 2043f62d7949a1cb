package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/services/curator/ingest"
)

// Claim is a daemon's hold on a batch or job: a PostgreSQL session
// advisory lock on a connection kept for the length of the work. If the
// worker dies its connection closes and the lock goes with it; nothing
// needs to time out.
type Claim struct {
	Entity ingest.Entity
	ID     int64
	conn   *pgxpool.Conn
	// job is the claimed job as its last move left it (nil when not read
	// yet): the next state's work starts from it without reading it again.
	job *ingest.JobRow
	// Attempts counts the claims of the entity at its current state, this
	// one included (a crash or hang of an earlier holder counted too);
	// LastError is the error of the last failed attempt.
	Attempts  int
	LastError string
	// FirstFailed is when its attempts at the current state began to fail
	// (zero: none failed, though workers may have crashed or hung on it).
	FirstFailed time.Time
	// traceparent is the batch's kept trace ("" when none).
	traceparent string
	// Epoch is the entity's claim count as this claim made it: the claim
	// holds while the entity's count is still this (check).
	Epoch int64
	// Worked is how long workers have worked on the entity, over every
	// attempt and state, this claim's work so far included.
	Worked time.Duration
	// checking serialises checks on the claim's connection (a job's files
	// are downloaded and stored several at once); checked is when one last
	// found the claim holding.
	checking sync.Mutex
	checked  time.Time
}

// errFenced says a claim was lost while its work went on: its session (and
// advisory lock) ended, or another worker claimed the entity since. The
// work stops before its next side effect; the new holder does it.
var ErrFenced = errors.New("ingest: the claim was lost (another worker holds it now)")

// check reports whether the claim still holds: on its own session (gone
// with a failover, and the lock with it), the entity's claim count is
// still the claim's. Not holding, it returns errFenced.
func (c *Claim) check(ctx context.Context, maxAge time.Duration) error {
	c.checking.Lock()
	defer c.checking.Unlock()
	if maxAge > 0 && time.Since(c.checked) < maxAge {
		return nil
	}
	var epoch int64
	if err := c.conn.QueryRow(ctx, `SELECT claim_epoch FROM `+ingest.Table(c.Entity)+` WHERE id = $1`, c.ID).Scan(&epoch); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: its session: %v", ErrFenced, err)
	}
	if epoch != c.Epoch {
		return fmt.Errorf("%w: claimed %d times since", ErrFenced, epoch-c.Epoch)
	}
	c.checked = time.Now()
	return nil
}

type claimKey struct{}

// fence checks, before a side effect of a daemon's work, that the claim
// the work runs under (in ctx) still holds; errFenced if not. Outside a
// claim it does nothing.
func Fence(ctx context.Context) error {
	if c, ok := ctx.Value(claimKey{}).(*Claim); ok {
		return c.check(ctx, 0)
	}
	return nil
}

// fenceEach is fence before one of a job's many like side effects (a
// file renamed into place, a file stored): a check made within the last
// fenceAge stands for it, so that a job of thousands of files does not
// make as many round trips. A new holder needs the old session gone and a
// claim of its own first; what the old one may still do in that time is
// write the same bytes under a key of the same version.
func FenceEach(ctx context.Context) error {
	if c, ok := ctx.Value(claimKey{}).(*Claim); ok {
		return c.check(ctx, fenceAge)
	}
	return nil
}

// fenceAge is how long a check of a claim stands for fenceEach.
const fenceAge = time.Second

func lockKey(e ingest.Entity, id int64) int64 {
	if e == ingest.Batch {
		return 1<<62 | id
	}
	return id
}

// tryClaim takes the lock if no one holds it, and checks the entity is
// still in state (it may have moved between the listing and the lock).
func tryClaim(ctx context.Context, db *pgxpool.Pool, e ingest.Entity, id int64, state ingest.State) (*Claim, error) {
	// db is the claims' own pool, sized for every daemon's concurrency, so
	// claims never starve the reads their work does on the main pool.
	conn, err := db.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// One round trip: the lock, and, if taken, the attempt counted on the
	// entity if it is still in state and due (it may have moved between the
	// listing and the lock, or be waiting out a failed attempt's backoff).
	var ok bool
	var attempts *int
	var lastErr, tp *string
	var firstFailed *time.Time
	var epoch *int64
	var worked *float64
	// The batch's kept trace comes with the claim: its steps continue it.
	traceparent := "traceparent"
	if e == ingest.Job {
		traceparent = "(SELECT b.traceparent FROM curator.batches b WHERE b.id = curator.jobs.batch_id)"
	}
	if err := conn.QueryRow(ctx, `WITH l AS (SELECT pg_try_advisory_lock($1) AS ok),
		u AS (UPDATE `+ingest.Table(e)+` SET attempts = attempts + 1, claim_epoch = claim_epoch + 1 WHERE id = $2 AND state = $3 AND next_attempt_at <= now()
			AND (SELECT ok FROM l) RETURNING attempts, last_attempt_error, first_failed_at, claim_epoch, `+traceparent+` AS tp,
				extract(epoch FROM worked)::float8 AS worked)
		SELECT (SELECT ok FROM l), (SELECT attempts FROM u), (SELECT last_attempt_error FROM u), (SELECT first_failed_at FROM u),
			(SELECT claim_epoch FROM u), (SELECT tp FROM u), (SELECT worked FROM u)`,
		lockKey(e, id), id, state).Scan(&ok, &attempts, &lastErr, &firstFailed, &epoch, &tp, &worked); err != nil || !ok {
		conn.Release()
		return nil, err
	}
	c := &Claim{Entity: e, ID: id, conn: conn}
	if attempts == nil {
		c.Release()
		return nil, nil
	}
	c.Attempts, c.LastError, c.Epoch = *attempts, *lastErr, *epoch
	if firstFailed != nil {
		c.FirstFailed = *firstFailed
	}
	if tp != nil {
		c.traceparent = *tp
	}
	if worked != nil {
		c.Worked = time.Duration(*worked * float64(time.Second))
	}
	return c, nil
}

// countAttempt counts an attempt at state on a claim carried on from an
// earlier state (the move reset the count).
func (c *Claim) countAttempt(ctx context.Context, state ingest.State) error {
	c.FirstFailed = time.Time{}
	err := c.conn.QueryRow(ctx, `UPDATE `+ingest.Table(c.Entity)+` SET attempts = attempts + 1 WHERE id = $1 AND state = $2
		RETURNING attempts, last_attempt_error`, c.ID, state).Scan(&c.Attempts, &c.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.ErrMoved
	}
	return err
}

// wait takes back the attempt of a claim that only waited, and keeps the
// entity out of its daemon's listing for d.
func (c *Claim) wait(ctx context.Context, state ingest.State, d time.Duration) error {
	_, err := c.conn.Exec(ctx, `UPDATE `+ingest.Table(c.Entity)+` SET attempts = greatest(attempts - 1, 0),
		next_attempt_at = now() + $3::interval WHERE id = $1 AND state = $2`, c.ID, state, d)
	return err
}

// backOff records a failed attempt under policy p: its error, when the
// failures began, and the time before the next attempt.
func (c *Claim) backOff(ctx context.Context, state ingest.State, p fault.Policy, reason string, worked time.Duration) error {
	d := p.Delay(max(c.Attempts, 1))
	_, err := c.conn.Exec(ctx, `UPDATE `+ingest.Table(c.Entity)+` SET next_attempt_at = now() + $3::interval, last_attempt_error = $4,
		first_failed_at = coalesce(first_failed_at, now()), worked = worked + $5::interval
		WHERE id = $1 AND state = $2`, c.ID, state, d, ingest.ScrubText(reason, 2000), worked)
	return err
}

// Release drops the claim.
func (c *Claim) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockKey(c.Entity, c.ID)); err != nil {
		// The lock is lost with the connection: close it rather than return
		// a connection that may still hold it to the pool.
		c.conn.Conn().Close(ctx)
	}
	c.conn.Release()
}

// Outcome is what a state's work decided: the state to move to, a detail
// for the history (the reason, for failed), columns of the entity's row
// set by the move's own statement, and other writes that go into the
// transition's transaction.
type Outcome struct {
	To     ingest.State
	Detail string
	// Set is column -> value, written by the statement that moves the
	// row: a move with nothing to Apply is a single statement.
	Set   map[string]any
	Apply func(ctx context.Context, tx pgx.Tx) error
}

// Work is one state's work on a claimed entity. It returns errStay to
// leave the entity where it is for a later pass (provisioning waiting for
// room).
type Work func(ctx context.Context, c *Claim) (Outcome, error)

var ErrStay = errors.New("ingest: stays for a later pass")

// SetConfig bounds a Set's daemons (the INGEST_* variables of the
// same names).
type SetConfig struct {
	// Interval is how long a daemon with nothing to do waits before
	// looking again, and the first backoff after a failed attempt.
	Interval time.Duration
	// RetryMax caps the backoff; RetryBudget and MaxAttempts bound the
	// failed attempts at one state (fault.Policy).
	RetryMax, RetryBudget time.Duration
	MaxAttempts           int
	// Concurrency is how many entities each daemon works at once;
	// MaxClaims how many all the daemons hold claimed, besides one of
	// each daemon's own.
	Concurrency, MaxClaims int
	// StepTimeout bounds one attempt's work; JobTimeout an entity's work
	// over all its attempts and states (0: none).
	StepTimeout, JobTimeout time.Duration
}

// Set is the daemons of the states that have work, one per state, with
// the claim slots and the connection pool they share.
type Set struct {
	store   *ingest.Store
	cfg     SetConfig
	log     *slog.Logger
	daemons []*daemon
	claims  *pgxpool.Pool
	shared  chan struct{}
	held    sync.Map
}

// NewSet makes an empty set over s. Claims hold a connection each for
// the length of their work: they get a pool of their own. The daemons
// share MaxClaims claim slots (11 daemons of INGEST_CONCURRENCY each
// could otherwise open 88 connections), and each has one more of its
// own, taken when no shared one is free, so that no state starves
// another (eight long downloads and eight long stores once held every
// slot while reports and notifications waited for hours).
func NewSet(s *ingest.Store, cfg SetConfig, log *slog.Logger) (*Set, error) {
	set := &Set{store: s, cfg: cfg, log: log, shared: make(chan struct{}, max(cfg.MaxClaims, 0))}
	pc := s.DB.Config().Copy()
	// Besides the shared slots, one of its own for each state a daemon works.
	own := map[ingest.Transition]bool{}
	for _, t := range ingest.Transitions {
		if t.By == ingest.Daemon {
			own[ingest.Transition{Entity: t.Entity, From: t.From}] = true
		}
	}
	pc.MaxConns = int32(max(cfg.MaxClaims, 0) + len(own))
	pc.MinConns = 0
	claims, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("ingest claims pool: %w", err)
	}
	set.claims = claims
	s.OnMove(set.Wake)
	return set, nil
}

// Add gives state st of entity e a daemon doing w.
func (s *Set) Add(e ingest.Entity, st ingest.State, w Work) {
	cfg := s.cfg
	s.daemons = append(s.daemons, &daemon{store: s.store, entity: e, state: st, work: w,
		interval: cfg.Interval, log: s.log, wake: make(chan struct{}, 1), held: &s.held, reserved: make(chan struct{}, 1),
		policy:      fault.Policy{Base: cfg.Interval, Max: max(cfg.RetryMax, cfg.Interval), Attempts: cfg.MaxAttempts, Budget: cfg.RetryBudget},
		stepTimeout: cfg.StepTimeout, jobTimeout: cfg.JobTimeout, claims: s.claims, shared: s.shared,
		sem: make(chan struct{}, max(cfg.Concurrency, 1)), next: func(to ingest.State) *daemon { return s.daemon(e, to) }})
}

// SetGate has every daemon wait while gate is closed (a dependency down)
// and tell an outage from a failure of the batch or job.
func (s *Set) SetGate(gate *fault.Gate) {
	for _, d := range s.daemons {
		d.gate = gate
	}
}

// Wake has the daemon of state to of e look for work now.
func (s *Set) Wake(e ingest.Entity, to ingest.State) {
	if d := s.daemon(e, to); d != nil {
		d.notify()
	}
}

// daemon is the daemon of a state, or nil.
func (s *Set) daemon(e ingest.Entity, st ingest.State) *daemon {
	for _, d := range s.daemons {
		if d.entity == e && d.state == st {
			return d
		}
	}
	return nil
}

// Run runs every daemon until ctx ends (work in hand finishes first),
// then closes the claims' pool.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, d := range s.daemons {
		wg.Go(func() { d.run(ctx) })
	}
	wg.Wait()
	s.Close()
}

// Close releases the claims' connections (Run does it when it ends).
func (s *Set) Close() { s.claims.Close() }

// Job is the claimed job as its last move left it, nil when not read yet:
// the next state's work starts from it without reading it again.
func (c *Claim) Job() *ingest.JobRow { return c.job }

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
	sem      chan struct{}              // a slot per entity in hand
	next     func(ingest.State) *daemon // the daemon of another state of the entity
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
			if err != nil && ctx.Err() == nil && !d.gate.Observe(ctx, err) {
				d.log.Error("ingest: list", "entity", d.entity, "state", d.state, "err", err)
			}
			for _, id := range ids {
				key := lockKey(d.entity, id)
				if _, mine := d.held.Load(key); mine {
					continue
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				slot := d.takeSlot(ctx)
				if slot == nil {
					<-sem
					return
				}
				c, err := tryClaim(ctx, d.claims, d.entity, id, d.state)
				if err != nil || c == nil {
					<-sem
					<-slot
					continue
				}
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

func (d *daemon) candidates(ctx context.Context) ([]int64, error) {
	q := `SELECT id FROM curator.jobs WHERE state = $1 AND next_attempt_at <= now() ORDER BY priority, id LIMIT 64`
	if d.entity == ingest.Batch {
		q = `SELECT id FROM curator.batches WHERE state = $1 AND next_attempt_at <= now() ORDER BY id LIMIT 64`
	}
	rows, err := d.store.DB.Query(ctx, q, d.state)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
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
	for {
		to, ok := cur.handle(ctx, c)
		var nd *daemon
		if ok && cur.next != nil {
			nd = cur.next(to)
		}
		if nd == nil {
			<-cur.sem
			return nil, slot
		}
		if ctx.Err() == nil && !cur.store.PausedNow() {
			select {
			case nd.sem <- struct{}{}:
				next := slot
				if slot != cur.shared {
					if next = nd.trySlot(); next == nil {
						<-nd.sem
						break
					}
				}
				<-cur.sem
				if next != slot {
					<-slot
					slot = next
				}
				if err := c.countAttempt(ctx, to); err != nil {
					<-nd.sem
					return nd, slot // moved meanwhile, or not counted: a pass of nd takes it
				}
				cur = nd
				continue
			default:
			}
		}
		<-cur.sem
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
			log.Warn("ingest: uncount a waiting attempt", "err", uerr)
		}
		return "", false
	}
	if ctx.Err() != nil {
		return "", false
	}
	if errors.Is(err, ErrFenced) {
		// Another worker holds it: nothing is recorded, its work is its.
		log.Warn("ingest: claim lost while working; the work is left to its new holder", "err", err)
		return "", false
	}
	if err != nil && (fault.IsOutage(err) || d.gate.Observe(ctx, err)) {
		// Not the entity's fault: its attempt is taken back, and the
		// daemons pause until the dependency answers again.
		log.Warn("ingest: a dependency is down; the attempt waits", "err", err)
		if uerr := c.wait(ctx, d.state, 0); uerr != nil && ctx.Err() == nil {
			log.Warn("ingest: uncount an attempt", "err", uerr)
		}
		return "", false
	}
	if err != nil && fault.IsPermanent(err) {
		if _, canFail := ingest.AllowedBy(d.entity, d.state, ingest.Failed, ingest.Daemon); canFail {
			out, err = Outcome{To: ingest.Failed, Detail: err.Error()}, nil
		}
	}
	if err != nil {
		log.Error("ingest: work failed; it will be tried again after a backoff", "err", err)
		if berr := c.backOff(ctx, d.state, d.policy, err.Error(), worked); berr != nil {
			log.Error("ingest: record the failed attempt", "err", berr)
		}
		return "", false
	}
	to, detail := out.To, out.Detail
	if worked > 0 {
		// The move keeps the work's time too (one statement still).
		if out.Set == nil {
			out.Set = map[string]any{}
		}
		out.Set["worked"] = ingest.AddInterval(worked)
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
			log.Info("ingest: moved by someone else meanwhile")
			return "", false
		}
		log.Error("ingest: transition", "to", to, "err", err)
		// A failed attempt too (a manifest streamed in the move's
		// transaction that failed, a lost connection): it backs off and
		// counts. A move that committed left the state: nothing is written.
		if d.gate.Observe(ctx, err) {
			return "", false // the database is out: the claim's session has gone
		}
		if berr := c.backOff(ctx, d.state, d.policy, fmt.Sprintf("move to %s: %v", to, err), worked); berr != nil {
			log.Error("ingest: record the failed attempt", "err", berr)
		}
		return "", false
	}
	c.job = row
	d.store.Implied(d.entity, to)
	if to == ingest.Failed {
		log.Warn("ingest: failed", "reason", detail)
	} else {
		log.Debug("ingest: moved", "to", to)
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
			d.log.Error("ingest: work panicked", string(d.entity), c.ID, "state", d.state, "panic", r, "stack", string(debug.Stack()))
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
