// Package replica keeps the archive's second copy written: every object
// recorded (archive.object.recorded) is copied from the primary store to
// the secondary with its sha256 checked as it streams, and every object
// deleted (archive.object.deleted) is deleted there too.
//
// A copy and a deletion of one object are serialized (an advisory lock on
// the object's name), and a deletion leaves a tombstone
// (auditor.replica_tombstones) that a copy delivered late honours: a
// withdrawn object is never written back into the second copy. A store
// that is down makes the message wait (it is delivered again, backing off,
// for as long as it takes); bytes in the primary that are not the recorded
// ones are not copied (the audit finds and repairs them), and are counted.
package replica

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
)

// Replicator writes the second copy.
type Replicator struct {
	db                 *pgxpool.Pool
	primary, secondary blob.Store
	log                *slog.Logger
	// outcomes counts what each message came to: copied, present (the
	// copy held it already), deleted, skipped (withdrawn or gone before
	// its copy), refused (the primary's bytes are not the recorded ones,
	// or the copy holds other bytes).
	outcomes *prometheus.CounterVec
}

// New returns a replicator from primary to secondary; reg (nil: none)
// takes its metrics.
func New(db *pgxpool.Pool, primary, secondary blob.Store, reg prometheus.Registerer, log *slog.Logger) *Replicator {
	r := &Replicator{db: db, primary: primary, secondary: secondary, log: log,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archivist_second_copy_total",
			Help: "What the replicator did with each recorded or deleted object: copied, present, deleted, skipped (withdrawn or gone first), refused (other bytes than recorded)."}, []string{"outcome"})}
	if reg != nil {
		reg.MustRegister(r.outcomes)
	}
	return r
}

// Recorded copies a recorded object to the second copy.
func (r *Replicator) Recorded(ctx context.Context, m *bus.Message[events.ObjectRecorded]) error {
	o := m.Event
	return r.locked(ctx, o.Object, func(tx pgx.Tx) error {
		var deletedAt time.Time
		err := tx.QueryRow(ctx, `SELECT deleted_at FROM auditor.replica_tombstones WHERE object = $1`, o.Object).Scan(&deletedAt)
		if err == nil && !deletedAt.Before(m.Envelope.SentAt) {
			r.count("skipped")
			r.log.InfoContext(ctx, "second copy: a recorded object was deleted since; not copied", "object", o.Object)
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if info, err := r.secondary.Stat(ctx, o.Object); err == nil && info.Size == o.Size && info.Checksum.Algorithm == "sha256" && info.Checksum.Value == o.SHA256 {
			r.count("present")
			return nil
		}
		rc, _, err := r.primary.Get(ctx, o.Object)
		if errors.Is(err, blob.ErrNotFound) {
			r.count("skipped")
			r.log.InfoContext(ctx, "second copy: a recorded object is gone from the primary; not copied", "object", o.Object)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s from the primary: %w", o.Object, err)
		}
		defer rc.Close()
		props := map[string]string{}
		for k, v := range o.Properties {
			props[k] = v
		}
		props[blob.PropSHA256] = o.SHA256
		_, err = r.secondary.Put(ctx, o.Object, rc, props)
		switch {
		case err == nil:
			r.count("copied")
			return nil
		case errors.Is(err, blob.ErrChecksumMismatch):
			r.count("refused")
			r.log.WarnContext(ctx, "second copy: the primary's bytes are not the recorded ones; not copied (the audit repairs the primary)", "object", o.Object, "err", err)
			return nil
		case errors.Is(err, blob.ErrExists):
			r.count("refused")
			r.log.WarnContext(ctx, "second copy: the copy holds other bytes under this version's key; left for its audit", "object", o.Object, "err", err)
			return nil
		}
		return fmt.Errorf("write %s to the second copy: %w", o.Object, err)
	})
}

// Deleted deletes a deleted object from the second copy, and leaves its
// tombstone.
func (r *Replicator) Deleted(ctx context.Context, m *bus.Message[events.ObjectDeleted]) error {
	key := m.Event.Object
	return r.locked(ctx, key, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.replica_tombstones (object, deleted_at) VALUES ($1, $2)
			ON CONFLICT (object) DO UPDATE SET deleted_at = greatest(auditor.replica_tombstones.deleted_at, excluded.deleted_at)`, key, m.Envelope.SentAt); err != nil {
			return err
		}
		if err := r.secondary.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("delete %s from the second copy: %w", key, err)
		}
		r.count("deleted")
		return nil
	})
}

// locked runs fn in a transaction holding the object's advisory lock: a
// copy and a deletion of one object never overlap. A store's error is the
// failure model's: an outage waits, nothing is dead-lettered for it.
func (r *Replicator) locked(ctx context.Context, object string, fn func(pgx.Tx) error) error {
	h := fnv.New64a()
	h.Write([]byte(object))
	err := pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil && !fault.IsPermanent(err) {
		return fault.Transient(err)
	}
	return err
}

func (r *Replicator) count(outcome string) { r.outcomes.WithLabelValues(outcome).Inc() }

// Gauges are the second copy's lag, read from its consumer on each scrape.
var Gauges = []service.Gauge{
	{Name: "archivist_second_copy_pending", Help: "Recorded objects not yet copied to the second copy (the replicator's backlog)."},
	{Name: "archivist_second_copy_lag_seconds", Help: "How long the oldest recorded object not yet copied to the second copy has waited (0: none waits)."},
}

// Lag reads the second copy's backlog and the age of its oldest message
// from the replicator's consumer: two requests, whatever the archive
// holds.
func Lag(ctx context.Context, b *bus.Bus) (service.Readings, error) {
	js := b.JetStream()
	c, err := js.Consumer(ctx, events.AuditorReplicate.Stream, events.AuditorReplicate.Config.Durable)
	if err != nil {
		return nil, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	pending := info.NumPending + uint64(info.NumAckPending)
	lag := 0.0
	if pending > 0 {
		st, err := js.Stream(ctx, events.AuditorReplicate.Stream)
		if err != nil {
			return nil, err
		}
		// The oldest not acknowledged: the first recorded message after
		// the acknowledgement floor.
		if m, err := st.GetMsg(ctx, info.AckFloor.Stream+1); err == nil {
			lag = time.Since(m.Time).Seconds()
		} else if m, err := st.GetLastMsgForSubject(ctx, events.SubjectObjectRecorded); err == nil {
			lag = time.Since(m.Time).Seconds()
		}
	}
	return service.Readings{
		"archivist_second_copy_pending":     {service.Read(float64(pending))},
		"archivist_second_copy_lag_seconds": {service.Read(lag)},
	}, nil
}
