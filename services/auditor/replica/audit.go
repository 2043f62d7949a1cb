package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/blob"
)

// CopyName names the second copy in its audit records.
const CopyName = "secondary"

// CheckMode is how the second copy's audit checks a file it holds.
type CheckMode string

const (
	// ReadCheck reads the file and compares its sha256 with the content
	// index's: finds rot under the provider's own checksum too.
	ReadCheck CheckMode = "read"
	// ChecksumCheck compares the store's stored checksum (S3: a HEAD, no
	// bytes) where it is a SHA-256, and reads the file where it is not.
	ChecksumCheck CheckMode = "checksum"
)

// Auditor checks the second copy on a cycle of its own: every object of
// the content index, a page at a time, so that a pass ends within Cycle.
// A file missing or other than the content index says is copied back from
// the primary, whose bytes are checked against the index on the way (the
// second copy is the archive's replica: rewriting it from a verified
// primary is always safe, as the replicator would); where the primary's
// are not the index's either, the record says so and the primary's own
// audit (and an operator) decide.
type Auditor struct {
	*Replicator
	// Cycle is how long one pass over the content index may take.
	Cycle time.Duration
	// Mode is how a held file is checked.
	Mode CheckMode
}

// Step checks the next page of the second copy's cycle, sized so that the
// pass ends within the cycle (tick is how often Step runs); it returns
// how many objects it checked.
func (a *Auditor) Step(ctx context.Context, tick time.Duration) (int, error) {
	var total int64
	var after string
	if _, err := a.db.Exec(ctx, `INSERT INTO auditor.copy_audit (copy) VALUES ($1) ON CONFLICT DO NOTHING`, CopyName); err != nil {
		return 0, err
	}
	// The archive's size from the planner's estimate, which costs nothing
	// whatever the archive holds; counted only while it is small (or not
	// yet estimated), where a count is cheap.
	if err := a.db.QueryRow(ctx, `SELECT CASE WHEN e.n >= 10000 THEN e.n ELSE (SELECT count(*) FROM auditor.schedule) END, a.after
		FROM auditor.copy_audit a, (SELECT reltuples::bigint AS n FROM pg_class WHERE oid = 'auditor.schedule'::regclass) e
		WHERE a.copy = $1`, CopyName).Scan(&total, &after); err != nil {
		return 0, err
	}
	page := int(math.Ceil(float64(total) * tick.Seconds() / math.Max(a.Cycle.Seconds(), 1)))
	page = min(max(page, 1), 1000)
	rows, err := a.db.Query(ctx, `SELECT object, checksum, size FROM auditor.content_index
		WHERE object > $1 AND checksum IS NOT NULL ORDER BY object LIMIT $2`, after, page)
	if err != nil {
		return 0, err
	}
	type entry struct {
		Object, Checksum string
		Size             *int64
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[entry])
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list {
		if err := a.checkOne(ctx, e.Object, e.Checksum); err != nil {
			return n, err // a store away: this object first, next time
		}
		n++
		if _, err := a.db.Exec(ctx, `UPDATE auditor.copy_audit SET after = $2, checked = checked + 1 WHERE copy = $1`, CopyName, e.Object); err != nil {
			return n, err
		}
	}
	if len(list) < page {
		// The pass ended: the next begins at the start.
		if _, err := a.db.Exec(ctx, `UPDATE auditor.copy_audit SET after = '', checked = 0, pass_started_at = now(), passes = passes + 1 WHERE copy = $1`, CopyName); err != nil {
			return n, err
		}
	}
	return n, nil
}

// checkOne checks object in the second copy against the content index's
// sha256, and copies it back from the primary if it is missing or other.
func (a *Auditor) checkOne(ctx context.Context, object, want string) error {
	return a.locked(ctx, object, func(tx pgx.Tx) error {
		var deleted bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auditor.replica_tombstones WHERE object = $1)`, object).Scan(&deleted); err != nil {
			return err
		}
		if deleted {
			return nil // withdrawn: not the second copy's to hold
		}
		held, err := a.holds(ctx, object, want)
		if err != nil {
			return err
		}
		if held {
			return a.logCopy(ctx, tx, object, "held", "")
		}
		outcome := "sour: copied back from the primary"
		if _, err := a.secondary.Stat(ctx, object); errors.Is(err, blob.ErrNotFound) {
			outcome = "missing: copied back from the primary"
		}
		rc, _, err := a.primary.Get(ctx, object)
		if errors.Is(err, blob.ErrNotFound) {
			return a.logCopy(ctx, tx, object, "both bad", "the primary does not hold it either: its own audit decides")
		}
		if err != nil {
			return fmt.Errorf("read %s from the primary: %w", object, err)
		}
		defer rc.Close()
		_, err = blob.Restore(ctx, a.secondary, object, rc, want)
		if errors.Is(err, blob.ErrChecksumMismatch) {
			return a.logCopy(ctx, tx, object, "both bad", "the primary's bytes are not the content index's either: its own audit decides")
		}
		if err != nil {
			return fmt.Errorf("copy %s back into the second copy: %w", object, err)
		}
		a.count("repaired")
		a.log.WarnContext(ctx, "second copy: its audit copied a file back from the primary", "object", object, "outcome", outcome)
		return a.logCopy(ctx, tx, object, outcome, "")
	})
}

// holds reports whether the second copy holds object with sha256 want,
// as Mode says to tell.
func (a *Auditor) holds(ctx context.Context, object, want string) (bool, error) {
	info, err := a.secondary.Stat(ctx, object)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s in the second copy: %w", object, err)
	}
	if a.Mode == ChecksumCheck && info.Checksum.Algorithm == "sha256" {
		return info.Checksum.Value == want, nil
	}
	rc, _, err := a.secondary.Get(ctx, object)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s from the second copy: %w", object, err)
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return false, fmt.Errorf("read %s from the second copy: %w", object, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}

func (a *Auditor) logCopy(ctx context.Context, tx pgx.Tx, object, outcome, note string) error {
	_, err := tx.Exec(ctx, `INSERT INTO auditor.copy_log (copy, object, outcome, note) VALUES ($1, $2, $3, $4)`, CopyName, object, outcome, note)
	return err
}

// Progress is the second copy's audit pass as `audit status` shows it.
type Progress struct {
	Copy        string    `json:"copy"`
	Checked     int64     `json:"checked"`
	Objects     int64     `json:"objects"`
	PassStarted time.Time `json:"pass_started"`
	Passes      int64     `json:"passes"`
	// ProjectedEnd is when the pass ends at the pace so far (zero before
	// any check).
	ProjectedEnd time.Time `json:"projected_end,omitzero"`
	// Repaired counts the files copied back in the last cycle.
	Repaired int64 `json:"repaired"`
}

// ReadProgress reads the second copy's audit progress.
func ReadProgress(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, cycle time.Duration) (*Progress, error) {
	p := &Progress{Copy: CopyName}
	err := q.QueryRow(ctx, `SELECT a.checked, (SELECT count(*) FROM auditor.schedule), a.pass_started_at, a.passes,
		(SELECT count(*) FROM auditor.copy_log l WHERE l.copy = a.copy AND l.at >= now() - $2::interval AND l.outcome LIKE '%copied back%')
		FROM auditor.copy_audit a WHERE a.copy = $1`, CopyName, cycle).Scan(&p.Checked, &p.Objects, &p.PassStarted, &p.Passes, &p.Repaired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if p.Checked > 0 {
		took := time.Since(p.PassStarted)
		p.ProjectedEnd = p.PassStarted.Add(time.Duration(float64(took) * float64(p.Objects) / float64(p.Checked)))
	}
	return p, nil
}
