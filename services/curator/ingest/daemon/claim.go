// Package daemon runs ingest's state daemons: one per state that has
// work, each claiming batches or jobs in that state (a PostgreSQL advisory
// lock on a connection kept for the work), working them, and moving them
// as the transition table allows, with bounded retries, fencing of lost
// claims, and a pause while a dependency is down.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/curator/ingest"
)

// Claim is a daemon's hold on a batch or job: a PostgreSQL session
// advisory lock on a connection kept for the length of the work. If the
// worker dies its connection closes and the lock goes with it; nothing
// needs to time out.
type Claim struct {
	Entity ingest.Entity
	ID     int64
	// Submitter is the entity's depositor.
	Submitter string
	conn      *pgxpool.Conn
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

// ErrFenced says a claim was lost while its work went on: its session (and
// advisory lock) ended, or another worker claimed the entity since. The
// work stops before its next side effect; the new holder does it.
var ErrFenced = errors.New("ingest: the claim was lost (another worker holds it now)")

// check reports whether the claim still holds: on its own session (gone
// with a failover, and the lock with it), the entity's claim count is
// still the claim's. Not holding, it returns ErrFenced.
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

// Fence checks, before a side effect of a daemon's work, that the claim
// the work runs under (in ctx) still holds; ErrFenced if not. Outside a
// claim it does nothing.
func Fence(ctx context.Context) error {
	if c, ok := ctx.Value(claimKey{}).(*Claim); ok {
		return c.check(ctx, 0)
	}
	return nil
}

// FenceEach is Fence before one of a job's many like side effects (a
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

// fenceAge is how long a check of a claim stands for FenceEach.
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

// backOff records a failed attempt under policy p through the kit's
// failure model (work.Failures): its error, when the failures began, and
// the time before the next attempt, counted as the claim counted it.
// Giving up is decided at the next claim (poisoned), where the attempts
// of workers that crashed or hung count too: here the policy only backs
// off.
func (c *Claim) backOff(ctx context.Context, state ingest.State, p fault.Policy, reason string, worked time.Duration) error {
	f := work.Failures{Table: ingest.Table(c.Entity), Count: "attempts", Counted: true, FirstFailedAt: "first_failed_at",
		NextAt: "next_attempt_at", Error: "last_attempt_error", Text: func(s string) string { return ingest.ScrubText(s, 2000) }}
	p.Attempts, p.Budget = 0, 0 // never parks here
	return pgx.BeginFunc(ctx, c.conn, func(tx pgx.Tx) error {
		// The reason alone: its kind was decided (an outage waits, a
		// permanent fault fails the entity where it may) before it came here.
		if _, _, err := f.FailWhere(ctx, tx, p, errors.New(reason), "id = $1 AND state = $2", c.ID, state); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE `+ingest.Table(c.Entity)+` SET worked = worked + $3::interval WHERE id = $1 AND state = $2`, c.ID, state, worked)
		return err
	})
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
	// Set are the columns written by the statement that moves the row:
	// a move with nothing to Apply is a single statement.
	Set   ingest.Columns
	Apply func(ctx context.Context, tx pgx.Tx) error
}

// Work is one state's work on a claimed entity. It returns ErrStay to
// leave the entity where it is for a later pass (provisioning waiting for
// room).
type Work func(ctx context.Context, c *Claim) (Outcome, error)

// ErrStay, returned by a Work, leaves the entity where it is, for a later
// pass, without counting a failed attempt.
var ErrStay = errors.New("ingest: stays for a later pass")

// Job is the claimed job as its last move left it, nil when not read yet:
// the next state's work starts from it without reading it again.
func (c *Claim) Job() *ingest.JobRow { return c.job }
