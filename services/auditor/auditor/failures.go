package auditor

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/auditor/workman"
)

// taskFailures keeps the worker manager's failure counts in PostgreSQL
// (workman.Failures), and parks an object whose task failed its last time.
type taskFailures struct{ db *pgxpool.Pool }

var _ workman.Failures = taskFailures{}

func (f taskFailures) Failures(ctx context.Context, id string) (int, error) {
	var n int
	err := f.db.QueryRow(ctx, `SELECT failures FROM auditor.task_failures WHERE task = $1`, id).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func (f taskFailures) Failed(ctx context.Context, id string, task *events.AuditTask, err error) (int, error) {
	var n int
	qerr := f.db.QueryRow(ctx, `INSERT INTO auditor.task_failures (task, object, failures, last_error) VALUES ($1, $2, 1, $3)
		ON CONFLICT (task) DO UPDATE SET failures = auditor.task_failures.failures + 1, last_error = EXCLUDED.last_error, at = now()
		RETURNING failures`, id, task.Object, events.FailureText(err.Error())).Scan(&n)
	if qerr != nil {
		return 0, fmt.Errorf("count a failure of task %s: %w", id, qerr)
	}
	return n, nil
}

func (f taskFailures) Exhausted(ctx context.Context, id string, task *events.AuditTask, err error) error {
	why := fmt.Sprintf("check failed %d times (%s task): %s", workman.MaxFailures, task.Reason, events.FailureText(err.Error()))
	if _, qerr := f.db.Exec(ctx, `UPDATE auditor.schedule SET parked_at = now(), parked_reason = $2 WHERE object = $1`, task.Object, why); qerr != nil {
		return fmt.Errorf("park %s: %w", task.Object, qerr)
	}
	return f.Done(ctx, id)
}

func (f taskFailures) Done(ctx context.Context, id string) error {
	_, err := f.db.Exec(ctx, `DELETE FROM auditor.task_failures WHERE task = $1 OR at < now() - interval '7 days'`, id)
	return err
}
