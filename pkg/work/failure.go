package work

import (
	"context"
	"errors"
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
	// Count, FirstFailedAt, NextAt and Error are the columns; ParkedAt,
	// if set, takes the time the unit parked.
	Count, FirstFailedAt, NextAt, Error, ParkedAt string
	// State and StateAt, if set, are a state column and its time: a failed
	// unit moves to FailedState, a parked one to ParkedState.
	State, StateAt, FailedState, ParkedState string
	// ParkedReason, if set, is a column that takes the reason when the
	// unit parks (and keeps its value otherwise).
	ParkedReason string
	// Text, if set, bounds or cleans the reason before it is stored.
	Text func(string) string
	// Counted says the claim already counted this attempt in Count (a
	// unit that counts its attempts when it is taken): the policy decides
	// on Count as it is, and Count is left alone.
	Counted bool
}

// Fail records a failure of the unit key in tx under policy p: its row is
// locked, the policy decides on its failures so far (this one included)
// and the first of them, and the row takes the decision: one more
// failure, its first failure's time kept, the next attempt, the reason,
// and parked (now) when the decision parks. It returns the decision.
func (f Failures) Fail(ctx context.Context, tx pgx.Tx, key any, p fault.Policy, cause error) (fault.Decision, error) {
	d, found, err := f.FailWhere(ctx, tx, p, cause, f.Key+" = $1", key)
	if err == nil && !found {
		err = fmt.Errorf("failure of %s %v: %w", f.Table, key, pgx.ErrNoRows)
	}
	return d, err
}

// FailWhere is Fail for the row where names (its arguments args, $1 on):
// a unit whose claim is fenced (its attempt, its state). found is false,
// and nothing is recorded, when no row matches (another attempt took it).
func (f Failures) FailWhere(ctx context.Context, tx pgx.Tx, p fault.Policy, cause error, where string, args ...any) (d fault.Decision, found bool, err error) {
	var failures int
	var first *time.Time
	var now time.Time
	err = tx.QueryRow(ctx, fmt.Sprintf(`SELECT %s, %s, now() FROM %s WHERE %s FOR UPDATE`, f.Count, f.FirstFailedAt, f.Table, where), args...).
		Scan(&failures, &first, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("failure of %s %v: %w", f.Table, args, err)
	}
	var firstAt time.Time
	if first != nil {
		firstAt = *first
	}
	if !f.Counted {
		failures++
	}
	d = p.Decide(cause, failures, firstAt, now)
	reason := d.Reason
	if f.Text != nil {
		reason = f.Text(reason)
	}
	n := len(args)
	retryAt, why, park := fmt.Sprintf("$%d", n+1), fmt.Sprintf("$%d", n+2), fmt.Sprintf("$%d", n+3)
	set := fmt.Sprintf(`%[1]s = coalesce(%[1]s, now()), %[2]s = %[3]s, %[4]s = %[5]s`, f.FirstFailedAt, f.NextAt, retryAt, f.Error, why)
	if !f.Counted {
		set += fmt.Sprintf(`, %[1]s = %[1]s + 1`, f.Count)
	}
	if f.ParkedAt != "" {
		set += fmt.Sprintf(`, %[1]s = CASE WHEN %[2]s THEN now() ELSE %[1]s END`, f.ParkedAt, park)
	}
	if f.ParkedReason != "" {
		set += fmt.Sprintf(`, %[1]s = CASE WHEN %[2]s THEN %[3]s ELSE %[1]s END`, f.ParkedReason, park, why)
	}
	if f.State != "" {
		set += fmt.Sprintf(`, %s = CASE WHEN %s THEN '%s' ELSE '%s' END, %s = now()`, f.State, park, f.ParkedState, f.FailedState, f.StateAt)
	}
	vals := append(args, d.RetryAt, reason)
	if f.ParkedAt != "" || f.ParkedReason != "" || f.State != "" {
		// A parameter no expression uses has no type PostgreSQL can tell.
		vals = append(vals, d.Park)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+f.Table+` SET `+set+` WHERE `+where, vals...); err != nil {
		return d, true, fmt.Errorf("failure of %s %v: %w", f.Table, args, err)
	}
	return d, true, nil
}
