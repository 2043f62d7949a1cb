// Package checkpoint keeps, in a service's own PostgreSQL tables, how far
// one of its JetStream consumers has acknowledged its stream, and takes
// again from the stream what a database restored to a backup lost.
//
// A handler stores an event's effect before the bus hears it
// acknowledged, so an event acknowledged is stored; but a PostgreSQL
// restored to a backup loses what was stored after the backup, while the
// bus, not restored, will never deliver those events again. So a Keeper
// writes the consumer's ack floor into the service's checkpoints table
// every interval: the restored database holds the checkpoint of the
// backup's time, and every event after it is handed to the handler again,
// read from the stream with bus.Reapply (the handler must take a replay
// as one, as every bus.Handler must). That is done when the Keeper starts
// (run it as the service's leader: a restore restarts the services or
// breaks the leader's session) and whenever the checkpoint read back is
// older than the one it wrote (the database went back under it). A start
// takes again one interval's events at most.
//
// The table, in the service's schema, is
//
//	CREATE TABLE <schema>.checkpoints (
//	    consumer   text PRIMARY KEY,
//	    stream_seq bigint NOT NULL CHECK (stream_seq >= 0),
//	    at         timestamptz NOT NULL DEFAULT now());
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
)

// DefaultInterval is how often a Keeper records the ack floor.
const DefaultInterval = 5 * time.Second

// Keeper keeps one consumer's checkpoint. Make it with For.
type Keeper struct {
	db       *pgxpool.Pool
	table    string
	consumer string
	// floor is the consumer's ack floor on the bus.
	floor func(context.Context) (uint64, error)
	// takeAgain hands the stream's events from sequence from over again.
	takeAgain func(ctx context.Context, from uint64) (bus.Reapplied, error)
	interval  time.Duration
	log       *slog.Logger
	gate      *fault.Gate
	// written is the checkpoint this Keeper wrote or read last (0: none).
	written uint64
}

// Option sets a Keeper's option.
type Option func(*Keeper)

// WithInterval sets how often the ack floor is recorded (DefaultInterval).
func WithInterval(d time.Duration) Option { return func(k *Keeper) { k.interval = d } }

// WithLogger sets the logger (slog's default).
func WithLogger(l *slog.Logger) Option { return func(k *Keeper) { k.log = l } }

// WithGate makes the Keeper wait while a dependency is down, and take a
// failure the gate explains as the outage's (none: every failure is
// logged, and retried the next interval).
func WithGate(g *fault.Gate) Option { return func(k *Keeper) { k.gate = g } }

// For is a Keeper of sub, a subscription as consumer c on bus b whose
// handler is h, with its checkpoint in table (schema-qualified: the
// service's own).
func For[T any, PT interface {
	*T
	events.Event
}](db *pgxpool.Pool, table string, b *bus.Bus, sub *bus.Subscription, c events.Consumer, h bus.Handler[T], opts ...Option) *Keeper {
	k := &Keeper{db: db, table: table, consumer: c.Config.Durable, floor: sub.AckFloor,
		takeAgain: func(ctx context.Context, from uint64) (bus.Reapplied, error) {
			return bus.Reapply[T, PT](ctx, b, c, from, h)
		},
		interval: DefaultInterval, log: slog.Default()}
	for _, o := range opts {
		o(k)
	}
	return k
}

// Run takes again what the database may have lost since its checkpoint,
// then keeps the checkpoint every interval until ctx ends (it returns
// nil then); a failure is logged and tried again the next interval.
func (k *Keeper) Run(ctx context.Context) error {
	t := time.NewTicker(k.interval)
	defer t.Stop()
	resumed := false
	for {
		if k.gate.Wait(ctx) != nil {
			return nil
		}
		var err error
		if !resumed {
			err = k.resume(ctx)
			resumed = err == nil
		}
		if err == nil {
			err = k.keep(ctx)
		}
		if err != nil && ctx.Err() == nil && !k.gate.Observe(ctx, err) {
			k.log.ErrorContext(ctx, "checkpoint of the events taken", "consumer", k.consumer, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// stored reads the checkpoint (ok false: none yet).
func (k *Keeper) stored(ctx context.Context) (seq uint64, ok bool, err error) {
	var s int64
	err = k.db.QueryRow(ctx, `SELECT stream_seq FROM `+k.table+` WHERE consumer = $1`, k.consumer).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the checkpoint of %s: %w", k.consumer, err)
	}
	return uint64(s), true, nil
}

// resume takes again every event after the stored checkpoint. A database
// without one (new, or made before checkpoints) starts from the
// consumer's ack floor: what it acknowledged is stored.
func (k *Keeper) resume(ctx context.Context) error {
	seq, ok, err := k.stored(ctx)
	if err != nil || !ok {
		return err
	}
	return k.reapply(ctx, seq, "a start")
}

// reapply takes the events after seq again, and logs what it did.
func (k *Keeper) reapply(ctx context.Context, seq uint64, why string) error {
	start := time.Now()
	r, err := k.takeAgain(ctx, seq+1)
	if err != nil {
		return fmt.Errorf("take again the events after the checkpoint %d: %w", seq, err)
	}
	if r.Lost > 0 {
		k.log.ErrorContext(ctx, "events after the database's checkpoint are no longer on the bus: what they said is lost to the database",
			"consumer", k.consumer, "checkpoint", seq, "lost", r.Lost)
	}
	k.log.InfoContext(ctx, "events since the checkpoint taken again", "consumer", k.consumer, "why", why,
		"checkpoint", seq, "to", r.To, "taken", r.Handled, "undecodable", r.Undecodable, "took", time.Since(start).Round(time.Millisecond))
	k.written = max(k.written, seq)
	return nil
}

// keep records the consumer's ack floor, first taking again what a
// checkpoint gone back (a restore under this Keeper) lost.
func (k *Keeper) keep(ctx context.Context) error {
	seq, ok, err := k.stored(ctx)
	if err != nil {
		return err
	}
	if ok && seq < k.written {
		k.log.WarnContext(ctx, "the database's checkpoint went back (restored from a backup?): taking the events since again",
			"consumer", k.consumer, "checkpoint", seq, "written", k.written)
		k.written = 0
		if err := k.reapply(ctx, seq, "the checkpoint went back"); err != nil {
			return err
		}
	}
	floor, err := k.floor(ctx)
	if err != nil {
		return fmt.Errorf("ack floor of %s: %w", k.consumer, err)
	}
	if ok && floor <= seq {
		k.written = max(k.written, seq)
		return nil
	}
	if _, err := k.db.Exec(ctx, `INSERT INTO `+k.table+` AS c (consumer, stream_seq) VALUES ($1, $2)
		ON CONFLICT (consumer) DO UPDATE SET stream_seq = GREATEST(c.stream_seq, EXCLUDED.stream_seq), at = now()`,
		k.consumer, int64(floor)); err != nil {
		return fmt.Errorf("write the checkpoint of %s: %w", k.consumer, err)
	}
	k.written = max(k.written, floor)
	return nil
}
