package integrity

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// pendingCheck is a check's effects waiting to be recorded. The checker
// records concurrent checks' effects in one transaction and one round trip
// (pkg/groupcommit): a check no longer pays a transaction of its own
// (BEGIN, an INSERT, an UPDATE, COMMIT: four round trips), which was most
// of a small object's check. A group that fails is written again one check
// at a time, so one check's fault is its own.
type pendingCheck struct {
	res     Result
	attempt int
}

// writeChecks runs the checks' statements in one transaction, one round
// trip.
func (c *Checker) writeChecks(ctx context.Context, group []pendingCheck) error {
	return pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, p := range group {
			if err := c.apply(ctx, b, p.res, p.attempt); err != nil {
				return err
			}
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			if len(group) == 1 {
				return fmt.Errorf("record the check of %s: %w", group[0].res.Observation.Object, err)
			}
			return fmt.Errorf("record %d checks: %w", len(group), err)
		}
		return nil
	})
}
