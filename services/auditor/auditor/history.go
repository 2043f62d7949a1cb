package auditor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/service"
)

// ErrNoObject is History's answer for an object the auditor does not know.
var ErrNoObject = errors.New("no such object")

// History is an object's integrity story: its audit log (added, updated,
// deleted), every completed check with its outcome row, failures of its
// tasks, resolution tasks and audit-queue entries, and whether it is
// parked.
func (a *Auditor) History(ctx context.Context, object string) (service.History, error) {
	h := service.History{Kind: "object", ID: object, Facts: []service.Fact{}, Events: []service.HistoryEvent{}}
	err := pgx.BeginTxFunc(ctx, a.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var checksum *string
		var size *int64
		var nextDue *time.Time
		var checkedAt, parkedAt *time.Time
		var parkedReason, lastAction *string
		err := tx.QueryRow(ctx, `SELECT c.checksum, c.size, s.next_due, s.checked_at, s.parked_at, s.parked_reason,
				(SELECT action FROM auditor.audit_log l WHERE l.object = o.object ORDER BY id DESC LIMIT 1)
			FROM (SELECT $1::text AS object) o
			LEFT JOIN auditor.content_index c ON c.object = o.object
			LEFT JOIN auditor.schedule s ON s.object = o.object
			WHERE c.object IS NOT NULL OR s.object IS NOT NULL OR EXISTS (SELECT 1 FROM auditor.audit_log l WHERE l.object = o.object)`,
			object).Scan(&checksum, &size, &nextDue, &checkedAt, &parkedAt, &parkedReason, &lastAction)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoObject
		} else if err != nil {
			return err
		}
		switch {
		case checksum == nil && nextDue == nil && deref(lastAction) == "delete":
			// Deleted (an object withdrawn): its story ends with the delete.
			h.State = "deleted"
		case parkedAt != nil:
			h.State = "parked"
		case checksum == nil:
			h.State = "lost"
		case checkedAt == nil:
			h.State = "not yet checked"
		default:
			h.State = "checked"
		}
		if checksum != nil {
			h.Facts = append(h.Facts, service.Fact{Name: "sha256", Value: *checksum})
		}
		if size != nil {
			h.Facts = append(h.Facts, service.Fact{Name: "size", Value: fmt.Sprintf("%d bytes", *size)})
		}
		if nextDue != nil {
			h.Facts = append(h.Facts, service.Fact{Name: "next check due", Value: nextDue.UTC().Format(time.RFC3339)})
		}
		if parkedAt != nil {
			h.Events = append(h.Events, service.HistoryEvent{At: *parkedAt, What: "parked", Detail: deref(parkedReason)})
		}
		rows, err := tx.Query(ctx, `(SELECT at, action, coalesce(checksum, '') || ' (' || source || ')' FROM auditor.audit_log WHERE object = $1 ORDER BY id DESC LIMIT $2)
			UNION ALL
			(SELECT at, CASE WHEN success THEN 'checked' WHEN bit_error THEN 'bit error' ELSE 'check failed' END,
				'row ' || row_no || ', attempt ' || attempt || CASE WHEN note <> '' THEN ': ' || note ELSE '' END
				FROM auditor.bit_log WHERE object = $1 ORDER BY id DESC LIMIT $2)
			UNION ALL
			(SELECT at, 'task failed', failures || ' failure(s): ' || last_error FROM auditor.task_failures WHERE object = $1 ORDER BY at DESC LIMIT $2)
			UNION ALL
			(SELECT created_at, 'resolution task (' || kind || ', ' || state || ')', 'row ' || row_no || ': ' || reason FROM auditor.resolution_tasks WHERE object = $1 ORDER BY id DESC LIMIT $2)
			UNION ALL
			(SELECT created_at, 'audit queue' || CASE WHEN done THEN ' (done)' ELSE '' END, 'row ' || row_no || ': ' || reason || coalesce(', ' || outcome, '')
				FROM auditor.audit_queue WHERE object = $1 ORDER BY id DESC LIMIT $2)`, object, service.MaxHistoryEvents)
		if err != nil {
			return err
		}
		if err := service.ScanEvents(&h, rows); err != nil {
			return err
		}
		// The operators' actions on its requests and repairs (pkg/work).
		acts, err := a.workHistory(ctx, tx, object)
		h.Events = append(h.Events, acts...)
		return err
	})
	if errors.Is(err, ErrNoObject) {
		return h, err
	} else if err != nil {
		return h, fmt.Errorf("object %s history: %w", object, err)
	}
	service.SortHistory(&h)
	return h, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
