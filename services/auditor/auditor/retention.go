package auditor

import (
	"context"
	"fmt"
	"time"
)

// trimPage is how many bit-log rows one statement of TrimBitLog moves.
const trimPage = 10_000

// TrimBitLog sums the bit-log rows older than the retention into
// auditor.bit_log_summary (a row per day and outcome) and deletes them,
// a page at a time, each page in one statement (summed and deleted
// together, or neither). It returns how many rows it moved.
func (a *Auditor) TrimBitLog(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, nil
	}
	cutoff := time.Now().Add(-retention)
	var total int64
	for {
		var n int64
		err := a.db.QueryRow(ctx, `WITH gone AS (
				DELETE FROM auditor.bit_log WHERE id IN (SELECT id FROM auditor.bit_log WHERE at < $1 ORDER BY id LIMIT $2)
				RETURNING at, row_no, success, bit_error),
			summed AS (
				INSERT INTO auditor.bit_log_summary (day, row_no, success, bit_error, checks)
				SELECT (at AT TIME ZONE 'UTC')::date, row_no, success, bit_error, count(*) FROM gone GROUP BY 1, 2, 3, 4
				ON CONFLICT (day, row_no, success, bit_error) DO UPDATE SET checks = bit_log_summary.checks + EXCLUDED.checks)
			SELECT count(*) FROM gone`, cutoff, trimPage).Scan(&n)
		if err != nil {
			return total, fmt.Errorf("trim the bit log: %w", err)
		}
		total += n
		if n < trimPage || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// trimStep trims the bit log once the dependencies answer, and logs it.
func (a *Auditor) trimStep(ctx context.Context) {
	if a.gate.Wait(ctx) != nil {
		return
	}
	n, err := a.TrimBitLog(ctx, a.cfg.BitLogRetention)
	if err != nil && ctx.Err() == nil && !a.gate.Observe(ctx, err) {
		a.log.ErrorContext(ctx, "audit: trim the bit log", "err", err)
	} else if n > 0 {
		a.log.InfoContext(ctx, "audit: bit log past its retention summed by day and deleted", "rows", n, "retention", a.cfg.BitLogRetention)
	}
}
