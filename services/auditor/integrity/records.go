package integrity

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
)

// Records keeps the content index, the audit log and the schedule from
// archive object events.
type Records struct {
	db    *pgxpool.Pool
	cycle time.Duration
	log   *slog.Logger
}

// NewRecords returns the records on db; every object is checked once per
// cycle; log hears of announcements refused.
func NewRecords(db *pgxpool.Pool, cycle time.Duration, log *slog.Logger) *Records {
	return &Records{db: db, cycle: cycle, log: log}
}

// Offset is where in the cycle an object's check falls: a hash of its key,
// so that checks are spread evenly and an object keeps its place.
func Offset(object string, cycle time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(object))
	return time.Duration(binary.BigEndian.Uint64(h.Sum(nil)) % uint64(cycle))
}

// Recorded records an object recorded by the archive (an event): in the
// content index, the audit log and the schedule, once per event.
func (r *Records) Recorded(ctx context.Context, eventID string, o *events.ObjectRecorded) error {
	return r.record(ctx, "event:"+eventID, o)
}

// Captured records what the storage provider holds for an object of the
// audit queue (entry queueID), as an event would have: the capture the
// outcome table's rows 7, 9 and 10 ask for.
func (r *Records) Captured(ctx context.Context, queueID int64, o *events.ObjectRecorded) error {
	return r.record(ctx, fmt.Sprintf("audit-queue:%d", queueID), o)
}

// record writes o into the content index, the audit log (with source, once
// per source) and the schedule.
func (r *Records) record(ctx context.Context, source string, o *events.ObjectRecorded) error {
	props, _ := json.Marshal(o.Properties)
	if o.Properties == nil {
		props = nil
	}
	action := "add"
	if o.Update {
		action = "update"
	}
	var refused error
	err := pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		var seen bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auditor.audit_log WHERE object = $1 AND source = $2)`,
			o.Object, source).Scan(&seen); err != nil {
			return err
		}
		if seen {
			return nil
		}
		if blob.Immutable(o.Object) {
			// A stored version never changes: other bytes announced for
			// its key are not recorded; its check, now, says what the store
			// holds (bytes written over it are row 2, rot).
			var held *string
			if err := tx.QueryRow(ctx, `SELECT checksum FROM auditor.content_index WHERE object = $1 FOR UPDATE`, o.Object).Scan(&held); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if held != nil && *held != o.SHA256 {
				refused = fmt.Errorf("%s is a stored version, recorded with sha256 %s: an announcement of sha256 %s (%s) is not recorded, and the object is checked now",
					o.Object, *held, o.SHA256, source)
				_, err := tx.Exec(ctx, `UPDATE auditor.schedule SET next_due = now() WHERE object = $1 AND next_due > now()`, o.Object)
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.content_index (object, checksum, size, properties) VALUES ($1, $2, $3, $4)
			ON CONFLICT (object) DO UPDATE SET checksum = EXCLUDED.checksum, size = EXCLUDED.size, properties = EXCLUDED.properties, updated_at = now()`,
			o.Object, o.SHA256, o.Size, props); err != nil {
			return fmt.Errorf("content index %s: %w", o.Object, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.audit_log (object, action, checksum, size, properties, source)
			VALUES ($1, $2, $3, $4, $5, $6)`, o.Object, action, o.SHA256, o.Size, props, source); err != nil {
			return fmt.Errorf("audit log %s: %w", o.Object, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due) VALUES ($1, now() + $2::interval)
			ON CONFLICT (object) DO NOTHING`, o.Object, Offset(o.Object, r.cycle)); err != nil {
			return fmt.Errorf("schedule %s: %w", o.Object, err)
		}
		return nil
	})
	if err == nil && refused != nil {
		r.log.Error("audit: a stored version announced with other bytes", "object", o.Object, "err", refused)
	}
	return err
}

// Deleted records an object deleted: out of the content index and the
// schedule, its open resolution tasks closed, a delete in the audit log.
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
			// Nothing left to resolve: a repair would restore what was withdrawn.
			`UPDATE auditor.resolution_tasks SET state = 'closed' WHERE object = $1 AND state = 'open'`,
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
