package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Claim is a daemon's hold on a batch or job: a PostgreSQL session
// advisory lock on a connection kept for the length of the work. If the
// worker dies its connection closes and the lock goes with it; nothing
// needs to time out.
type Claim struct {
	Entity Entity
	ID     int64
	conn   *pgxpool.Conn
	// job is the claimed job as its last move left it (nil when not read
	// yet): the next state's work starts from it without reading it again.
	job *JobRow
}

func lockKey(e Entity, id int64) int64 {
	if e == Batch {
		return 1<<62 | id
	}
	return id
}

// tryClaim takes the lock if no one holds it, and checks the entity is
// still in state (it may have moved between the listing and the lock).
func tryClaim(ctx context.Context, db *pgxpool.Pool, e Entity, id int64, state State) (*Claim, error) {
	// db is the claims' own pool, sized for every daemon's concurrency, so
	// claims never starve the reads their work does on the main pool.
	conn, err := db.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// One round trip: the lock, and whether the entity is still in state
	// (it may have moved between the listing and the lock).
	var ok, still bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1), EXISTS (SELECT FROM `+table(e)+` WHERE id = $2 AND state = $3)`,
		lockKey(e, id), id, state).Scan(&ok, &still); err != nil || !ok {
		conn.Release()
		return nil, err
	}
	c := &Claim{Entity: e, ID: id, conn: conn}
	if !still {
		c.Release()
		return nil, nil
	}
	return c, nil
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
	To     State
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

var errStay = errors.New("ingest: stays for a later pass")

// daemon claims entities in one state, lowest priority number first, and
// works up to cap(sem) of them at once.
type daemon struct {
	store    *Store
	entity   Entity
	state    State
	work     Work
	interval time.Duration
	log      *slog.Logger
	wake     chan struct{}
	claims   *pgxpool.Pool
	sem      chan struct{}       // a slot per entity in hand
	next     func(State) *daemon // the daemon of another state of the entity
	// held is what this process has claimed, by lock key, shared by all
	// daemons: a listing skips it without asking PostgreSQL (a job carried
	// from state to state is listed by each state's daemon in turn).
	held *sync.Map
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
		claimed := 0
		paused, err := d.store.Paused(ctx)
		if err == nil {
			d.store.paused.Store(paused)
		}
		if err == nil && !paused {
			ids, err := d.candidates(ctx)
			if err != nil && ctx.Err() == nil {
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
				c, err := tryClaim(ctx, d.claims, d.entity, id, d.state)
				if err != nil || c == nil {
					<-sem
					continue
				}
				claimed++
				d.held.Store(key, true)
				wg.Add(1)
				go func() {
					defer wg.Done()
					next := carry(ctx, c, d)
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
	q := `SELECT id FROM curator.jobs WHERE state = $1 ORDER BY priority, id LIMIT 64`
	if d.entity == Batch {
		q = `SELECT id FROM curator.batches WHERE state = $1 ORDER BY id LIMIT 64`
	}
	rows, err := d.store.db.Query(ctx, q, d.state)
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

// carry works the claimed entity in cur (whose slot it holds) and, while
// the next state's daemon has a free slot and the queue is not paused,
// goes on there under the same claim: a job moves through its states
// without being listed and claimed again at each, and each state's
// concurrency still bounds how many are in it. It releases the slots and
// the claim, and returns the daemon of the state it left the entity in for
// lack of a slot (nil if none).
func carry(ctx context.Context, c *Claim, cur *daemon) *daemon {
	defer c.Release()
	for {
		to, ok := cur.handle(ctx, c)
		var nd *daemon
		if ok && cur.next != nil {
			nd = cur.next(to)
		}
		if nd == nil {
			<-cur.sem
			return nil
		}
		if ctx.Err() == nil && !cur.store.paused.Load() {
			select {
			case nd.sem <- struct{}{}:
				<-cur.sem
				cur = nd
				continue
			default:
			}
		}
		<-cur.sem
		return nd
	}
}

// handle works the claimed entity and makes the transition; it returns
// the state reached, and false if there was none.
func (d *daemon) handle(ctx context.Context, c *Claim) (State, bool) {
	log := d.log.With(string(d.entity), c.ID, "state", d.state)
	out, err := d.work(ctx, c)
	c.job = nil
	if errors.Is(err, errStay) || ctx.Err() != nil {
		return "", false
	}
	if err != nil {
		log.Error("ingest: work failed; it will be tried again", "err", err)
		time.Sleep(d.interval) // before another pass takes it up
		return "", false
	}
	to, detail := out.To, out.Detail
	// The transition runs on the claim's own connection: a worker never
	// needs a second connection to finish what it holds.
	var row *JobRow
	if d.entity == Job {
		row = &JobRow{}
	}
	err = d.store.moveOnRow(ctx, c.conn, d.entity, c.ID, d.state, to, Daemon, detail, out.Set, out.Apply, row)
	if err != nil {
		if errors.Is(err, ErrMoved) {
			log.Info("ingest: moved by someone else meanwhile")
			return "", false
		}
		log.Error("ingest: transition", "to", to, "err", err)
		return "", false
	}
	c.job = row
	d.store.implied(d.entity, to)
	if to == Failed {
		log.Warn("ingest: failed", "reason", detail)
	} else {
		log.Debug("ingest: moved", "to", to)
	}
	return to, true
}

// String names the daemon.
func (d *daemon) String() string { return fmt.Sprintf("%s-%s", d.entity, d.state) }
