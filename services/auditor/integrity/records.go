package integrity

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
)

// Records keeps the content index, the audit log and the schedule from
// archive object events.
type Records struct {
	db    *pgxpool.Pool
	cycle time.Duration
}

// NewRecords returns the records on db; every object is checked once per
// cycle.
func NewRecords(db *pgxpool.Pool, cycle time.Duration) *Records {
	return &Records{db: db, cycle: cycle}
}

// Offset is where in the cycle an object's check falls: a hash of its key,
// so that checks are spread evenly and an object keeps its place.
func Offset(object string, cycle time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(object))
	return time.Duration(binary.BigEndian.Uint64(h.Sum(nil)) % uint64(cycle))
}

// Recorded records an object stored or replaced: the content index, an add
// or update in the audit log, and its place in the schedule. A redelivered
// event (same event id) is recorded once.
func (r *Records) Recorded(ctx context.Context, eventID string, o *events.ObjectRecorded) error {
	props, _ := json.Marshal(o.Properties)
	if o.Properties == nil {
		props = nil
	}
	action := "add"
	if o.Update {
		action = "update"
	}
	return pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		var seen bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auditor.audit_log WHERE object = $1 AND source = 'event:' || $2)`,
			o.Object, eventID).Scan(&seen); err != nil {
			return err
		}
		if seen {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.content_index (object, checksum, size, properties) VALUES ($1, $2, $3, $4)
			ON CONFLICT (object) DO UPDATE SET checksum = EXCLUDED.checksum, size = EXCLUDED.size, properties = EXCLUDED.properties, updated_at = now()`,
			o.Object, o.SHA256, o.Size, props); err != nil {
			return fmt.Errorf("content index %s: %w", o.Object, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.audit_log (object, action, checksum, size, properties, source)
			VALUES ($1, $2, $3, $4, $5, 'event:' || $6)`, o.Object, action, o.SHA256, o.Size, props, eventID); err != nil {
			return fmt.Errorf("audit log %s: %w", o.Object, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due) VALUES ($1, now() + $2::interval)
			ON CONFLICT (object) DO NOTHING`, o.Object, Offset(o.Object, r.cycle)); err != nil {
			return fmt.Errorf("schedule %s: %w", o.Object, err)
		}
		return nil
	})
}

// Deleted records an object deleted: out of the content index and the
// schedule, a delete in the audit log.
func (r *Records) Deleted(ctx context.Context, eventID string, o *events.ObjectDeleted) error {
	return pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		var seen bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auditor.audit_log WHERE object = $1 AND source = 'event:' || $2)`,
			o.Object, eventID).Scan(&seen); err != nil || seen {
			return err
		}
		for _, q := range []string{
			`DELETE FROM auditor.content_index WHERE object = $1`,
			`DELETE FROM auditor.schedule WHERE object = $1`,
			`INSERT INTO auditor.audit_log (object, action, source) VALUES ($1, 'delete', 'event:' || $2)`,
		} {
			args := []any{o.Object}
			if len(q) > 0 && q[0] == 'I' {
				args = append(args, eventID)
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return fmt.Errorf("delete %s: %w", o.Object, err)
			}
		}
		return nil
	})
}
