package work

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/fault"
)

// Failures names a table's failure-model columns (ARCHITECTURE decision
// 7): how many times a unit failed at its current step, when the first of
// those failures was, when it is tried next, its last error, and when it
// was parked. Fail records a failure in them the same way for every
// pipeline that keeps them.
type Failures struct {
	// Table and Key are the table and the column a unit is found by.
	Table, Key string
	// Count, FirstFailedAt, NextAt, Error and ParkedAt are the columns.
	Count, FirstFailedAt, NextAt, Error, ParkedAt string
	// ParkedReason, if set, is a column that takes the reason when the
	// unit parks (and keeps its value otherwise).
	ParkedReason string
	// Text, if set, bounds or cleans the reason before it is stored.
	Text func(string) string
}

// Fail records a failure of the unit key in tx under policy p: its row is
// locked, the policy decides on its failures so far (this one included)
// and the first of them, and the row takes the decision: one more
// failure, its first failure's time kept, the next attempt, the reason,
// and parked (now) when the decision parks. It returns the decision.
func (f Failures) Fail(ctx context.Context, tx pgx.Tx, key any, p fault.Policy, cause error) (fault.Decision, error) {
	var failures int
	var first *time.Time
	var now time.Time
	if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT %s, %s, now() FROM %s WHERE %s = $1 FOR UPDATE`, f.Count, f.FirstFailedAt, f.Table, f.Key), key).
		Scan(&failures, &first, &now); err != nil {
		return fault.Decision{}, fmt.Errorf("failure of %s %v: %w", f.Table, key, err)
	}
	var firstAt time.Time
	if first != nil {
		firstAt = *first
	}
	d := p.Decide(cause, failures+1, firstAt, now)
	reason := d.Reason
	if f.Text != nil {
		reason = f.Text(reason)
	}
	set := fmt.Sprintf(`%[1]s = %[1]s + 1, %[2]s = coalesce(%[2]s, now()), %[3]s = $2, %[4]s = $3, %[5]s = CASE WHEN $4 THEN now() ELSE %[5]s END`,
		f.Count, f.FirstFailedAt, f.NextAt, f.Error, f.ParkedAt)
	if f.ParkedReason != "" {
		set += fmt.Sprintf(`, %[1]s = CASE WHEN $4 THEN $3 ELSE %[1]s END`, f.ParkedReason)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+f.Table+` SET `+set+` WHERE `+f.Key+` = $1`, key, d.RetryAt, reason, d.Park); err != nil {
		return d, fmt.Errorf("failure of %s %v: %w", f.Table, key, err)
	}
	return d, nil
}
