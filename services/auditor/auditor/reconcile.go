package auditor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/integrity"
)

// Reconciled counts what one page of the reconciliation found and fixed.
type Reconciled struct {
	// Compared is how many store objects the page held.
	Compared int `json:"compared"`
	// Unscheduled are objects recorded (in the content index) but missing
	// from the schedule: scheduled again.
	Unscheduled int `json:"unscheduled"`
	// Unrecorded are objects in the store the archive has no record of
	// (their archive.object.recorded was lost): queued for capture.
	Unrecorded int `json:"unrecorded"`
	// Missing are scheduled objects gone from the store: checked now (the
	// outcome table reports them).
	Missing int `json:"missing"`
	// Deleted are scheduled objects gone from the store whose deletion the
	// audit log records: unscheduled.
	Deleted int `json:"deleted"`
	// PassDone says the page ended a pass over the store.
	PassDone bool `json:"pass_done"`
}

// Reconcile compares the next page of up to limit objects of the blob store
// (under AUDITOR_RECONCILE_PREFIX) with the schedule over the same range
// of keys, fixes both sides, and moves the sweep on; at the end of the
// store the next call starts a new pass. Memory and work per call are a
// page's, whatever the archive's size.
func (a *Auditor) Reconcile(ctx context.Context, limit int) (Reconciled, error) {
	var r Reconciled
	prefix := a.cfg.ReconcilePrefix
	var after string
	if err := a.db.QueryRow(ctx, `SELECT after FROM auditor.reconcile`).Scan(&after); err != nil {
		return r, fmt.Errorf("reconcile cursor: %w", err)
	}
	page, err := blob.ListAfter(ctx, a.blob, prefix, after, limit)
	if err != nil {
		return r, fmt.Errorf("list the store after %q: %w", after, err)
	}
	r.PassDone = len(page) < limit
	upper := "" // the range's end: none at the end of the store
	if !r.PassDone {
		upper = page[len(page)-1].Key
	}
	rows, err := a.db.Query(ctx, `SELECT s.object, ci.object IS NOT NULL FROM auditor.schedule s
		LEFT JOIN auditor.content_index ci ON ci.object = s.object
		WHERE s.object COLLATE "C" > $1 AND ($2 = '' OR s.object COLLATE "C" <= $2) AND starts_with(s.object, $3)
		ORDER BY s.object COLLATE "C" LIMIT $4`, after, upper, prefix, limit)
	if err != nil {
		return r, fmt.Errorf("schedule after %q: %w", after, err)
	}
	type entry struct {
		object  string
		indexed bool
	}
	scheduled, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (entry, error) {
		var e entry
		return e, row.Scan(&e.object, &e.indexed)
	})
	if err != nil {
		return r, fmt.Errorf("schedule after %q: %w", after, err)
	}
	if len(scheduled) == limit {
		// As many scheduled as a page: the range ends at the last of them.
		last := scheduled[len(scheduled)-1].object
		if upper == "" || last < upper {
			upper, r.PassDone = last, false
			for len(page) > 0 && page[len(page)-1].Key > upper {
				page = page[:len(page)-1]
			}
		}
	}
	r.Compared = len(page)
	inSchedule := make(map[string]bool, len(scheduled))
	for _, e := range scheduled {
		inSchedule[e.object] = true
	}
	var unscheduled []string
	var modified []time.Time
	for _, info := range page {
		if !inSchedule[info.Key] {
			unscheduled = append(unscheduled, info.Key)
			modified = append(modified, info.Modified)
		}
	}
	inStore := make(map[string]bool, len(page))
	for _, info := range page {
		inStore[info.Key] = true
	}
	var gone []string
	for _, e := range scheduled {
		if !inStore[e.object] {
			gone = append(gone, e.object)
		}
	}
	err = pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		r.Unscheduled, r.Unrecorded, r.Missing, r.Deleted = 0, 0, 0, 0
		if len(unscheduled) > 0 {
			// Recorded: scheduled again, spread over the cycle as ever.
			offsets := make([]float64, len(unscheduled))
			for i, o := range unscheduled {
				offsets[i] = integrity.Offset(o, a.cfg.Cycle).Seconds()
			}
			tag, err := tx.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due)
				SELECT u.o, now() + make_interval(secs => u.secs)
				FROM unnest($1::text[], $2::float8[]) AS u(o, secs) JOIN auditor.content_index ci ON ci.object = u.o
				ON CONFLICT (object) DO NOTHING`, unscheduled, offsets)
			if err != nil {
				return fmt.Errorf("schedule recorded objects: %w", err)
			}
			r.Unscheduled = int(tag.RowsAffected())
			// Never recorded: captured from the store (the outcome
			// table's row 9, "added at the provider, not yet captured"),
			// but for an object the audit log last says was deleted,
			// written before that: its deletion from the store is pending
			// or failed (a withdrawal), and a capture would make it the
			// archive's again and its next check a bit error.
			tag, err = tx.Exec(ctx, `INSERT INTO auditor.audit_queue (object, reason, row_no)
				SELECT u.o, 'in the store, never recorded (reconciliation)', 9 FROM unnest($1::text[], $2::timestamptz[]) AS u(o, modified)
				WHERE NOT EXISTS (SELECT 1 FROM auditor.content_index ci WHERE ci.object = u.o)
				AND NOT EXISTS (SELECT 1 FROM (SELECT action, at FROM auditor.audit_log l WHERE l.object = u.o ORDER BY id DESC LIMIT 1) last
					WHERE last.action = 'delete' AND last.at >= u.modified)
				ON CONFLICT (object) WHERE NOT done DO NOTHING`, unscheduled, modified)
			if err != nil {
				return fmt.Errorf("queue unrecorded objects: %w", err)
			}
			r.Unrecorded = int(tag.RowsAffected())
		}
		if len(gone) > 0 {
			// Deleted as the audit log says: nothing left to check.
			tag, err := tx.Exec(ctx, `DELETE FROM auditor.schedule s WHERE s.object = ANY($1)
				AND (SELECT action FROM auditor.audit_log l WHERE l.object = s.object ORDER BY id DESC LIMIT 1) = 'delete'`, gone)
			if err != nil {
				return fmt.Errorf("unschedule deleted objects: %w", err)
			}
			r.Deleted = int(tag.RowsAffected())
			// Gone without a deletion: due now, so the table reports it.
			tag, err = tx.Exec(ctx, `UPDATE auditor.schedule SET next_due = now() WHERE object = ANY($1) AND next_due > now()`, gone)
			if err != nil {
				return fmt.Errorf("check missing objects: %w", err)
			}
			r.Missing = int(tag.RowsAffected())
		}
		next := upper
		if r.PassDone {
			_, err := tx.Exec(ctx, `UPDATE auditor.reconcile SET after = '', passes = passes + 1, pass_started_at = now()`)
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE auditor.reconcile SET after = $1`, next)
		return err
	})
	if err != nil {
		return r, err
	}
	if a.reconciled != nil {
		for kind, n := range map[string]int{"unscheduled": r.Unscheduled, "unrecorded": r.Unrecorded, "missing": r.Missing, "deleted": r.Deleted} {
			a.reconciled.WithLabelValues(kind).Add(float64(n))
		}
	}
	return r, nil
}
