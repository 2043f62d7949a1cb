package integrity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
)

// ErrNotRepairable is a resolution task no repair here can resolve: not
// open, external (the storage provider's to resolve), or of a row with no
// internal repair.
var ErrNotRepairable = errors.New("not internally repairable")

// Repaired is what a repair did.
type Repaired struct {
	Task   int64  `json:"task"`
	Object string `json:"object"`
	Row    int    `json:"row"`
	// Action is "content copied from the secondary store" or "audit log
	// recaptured from the content index".
	Action string `json:"action"`
}

// Repair resolves an open internally resolvable task: content gone sour
// (row 2) is copied back from the secondary store, checked on the way (its
// sha256 must be the content index's) and by the store on arrival; an
// audit log item corrupted on insert (row 6) is written again from the
// content index. The repair goes into the audit log, and the task is
// closed, in one transaction. The object's next check verifies it.
func (c *Checker) Repair(ctx context.Context, task int64) (*Repaired, error) {
	var r Repaired
	var kind, state string
	err := c.db.QueryRow(ctx, `SELECT id, object, row_no, kind, state FROM auditor.resolution_tasks WHERE id = $1`, task).
		Scan(&r.Task, &r.Object, &r.Row, &kind, &state)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (state != "open" || kind != "internal" || (r.Row != 2 && r.Row != 6))) {
		return nil, fault.Permanent(fmt.Errorf("resolution task %d (%s, %s, row %d): %w", task, state, kind, r.Row, ErrNotRepairable))
	}
	if err != nil {
		return nil, fmt.Errorf("resolution task %d: %w", task, err)
	}
	var sum string
	var size int64
	if err := c.db.QueryRow(ctx, `SELECT checksum, size FROM auditor.content_index WHERE object = $1 AND checksum IS NOT NULL`, r.Object).Scan(&sum, &size); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			// Withdrawn, or never recorded: no record to repair to.
			return nil, fault.Permanent(fmt.Errorf("resolution task %d: the content index has no checksum of %s to repair to: %w", task, r.Object, ErrNotRepairable))
		}
		return nil, fmt.Errorf("the content index of %s: %w", r.Object, err)
	}
	switch r.Row {
	case 2:
		if c.secondary == nil {
			return nil, fault.Permanent(fmt.Errorf("resolution task %d: no secondary store (AUDITOR_SECONDARY_BLOB_URL): %w", task, ErrNotRepairable))
		}
		if err := c.copyBack(ctx, r.Object, sum); err != nil {
			return nil, err
		}
		r.Action = "content copied from the secondary store"
	case 6:
		r.Action = "audit log recaptured from the content index"
	}
	err = pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO auditor.audit_log (object, action, checksum, size, source) VALUES ($1, 'update', $2, $3, $4)`,
			r.Object, sum, size, fmt.Sprintf("repair:task-%d: %s", task, r.Action)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE auditor.resolution_tasks SET state = 'closed' WHERE id = $1 AND state = 'open'`, task)
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("resolution task %d was closed meanwhile", task)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record the repair of %s: %w", r.Object, err)
	}
	return &r, nil
}

// copyBack restores the secondary store's copy of object into the primary
// store (blob.Restore: a stored version's key takes back its recorded
// bytes, and no others), its sha256 checked on the way against want (the
// content index's) and stated to the store, which checks it again.
func (c *Checker) copyBack(ctx context.Context, object, want string) error {
	rc, _, err := c.secondary.Get(ctx, object)
	if err != nil {
		return fmt.Errorf("the secondary copy of %s: %w", object, err)
	}
	defer rc.Close()
	h := sha256.New()
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(io.MultiWriter(pw, h), rc)
		if err == nil && hex.EncodeToString(h.Sum(nil)) != want {
			// Not for good: the second copy may be repaired in its turn.
			err = fmt.Errorf("the secondary copy of %s is not what the content index says either (sha256 %s, want %s)", object, hex.EncodeToString(h.Sum(nil)), want)
		}
		pw.CloseWithError(err)
	}()
	if _, err := blob.Restore(ctx, c.store, object, pr, want); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("copy %s back: %w", object, err)
	}
	return nil
}
