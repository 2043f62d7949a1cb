package auditor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// Work is the auditor's work as the work kit's items (pkg/work): the audit
// queue's requests (queued, retrying, parked, done) and the internal
// repairs (open, retrying, parked, closed) and the parked checks (objects
// whose checks kept failing), found by state, age, object or the words of
// their error. A retry of a request forgets its failures and
// checks its object now (as `archivist audit check` does); a retry of a
// repair forgets its failures and lets the repair loop take it.
func (a *Auditor) Work() *work.Store {
	requests := &work.SQLSource{PipelineName: "audit", KindName: "request",
		Table: work.Table{
			From: "auditor.audit_queue q", Lock: "q", ID: "q.id", IDType: "bigint",
			State: "q.work_state", MovedAt: "q.state_at", CreatedAt: "q.created_at",
			Attempts:      "q.failures",
			NextAttemptAt: "CASE WHEN q.next_attempt_at > now() AND NOT q.done THEN q.next_attempt_at END",
			Reason:        "coalesce(nullif(q.last_error, ''), q.reason)",
			Keys:          []string{"q.object"},
			Text:          "q.last_error",
			Open:          []string{"queued", "retrying"}, Done: []string{"done"}, Arrived: "q.created_at",
		},
		From: map[work.Verb][]string{work.Retry: {"retrying", "parked"}, work.Release: {"parked"}},
	}
	requests.Do = func(ctx context.Context, tx pgx.Tx, v work.Verb, ids []string, note work.Note) (func(context.Context), error) {
		nums, err := work.Int64s(ids)
		if err != nil {
			return nil, err
		}
		rows, err := tx.Query(ctx, `UPDATE auditor.audit_queue SET parked_at = NULL, failures = 0, first_failed_at = NULL,
			next_attempt_at = '-infinity' WHERE id = ANY($1) RETURNING object`, nums)
		if err != nil {
			return nil, err
		}
		objects, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		return a.checkAfter(objects, note), nil
	}
	repairs := &work.SQLSource{PipelineName: "audit", KindName: "repair",
		Table: work.Table{
			From: "auditor.resolution_tasks r", Lock: "r", ID: "r.id", IDType: "bigint", Where: "r.kind = 'internal'",
			State: "r.work_state", MovedAt: "r.state_at", CreatedAt: "r.created_at",
			Attempts:      "r.repair_failures",
			NextAttemptAt: "CASE WHEN r.repair_next_at > now() AND r.state = 'open' THEN r.repair_next_at END",
			Reason:        "coalesce(nullif(r.repair_error, ''), r.reason)",
			Keys:          []string{"r.object"},
			Text:          "r.reason || ' ' || r.repair_error",
			Open:          []string{"open", "retrying"}, Done: []string{"closed"}, Arrived: "r.created_at",
		},
		From: map[work.Verb][]string{work.Retry: {"retrying", "parked"}, work.Release: {"parked"}},
	}
	repairs.Do = func(ctx context.Context, tx pgx.Tx, v work.Verb, ids []string, note work.Note) (func(context.Context), error) {
		nums, err := work.Int64s(ids)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `UPDATE auditor.resolution_tasks SET repair_parked_at = NULL, repair_failures = 0,
			repair_first_failed_at = NULL, repair_next_at = NULL WHERE id = ANY($1)`, nums)
		return nil, err
	}
	checks := &work.SQLSource{PipelineName: "audit", KindName: "check",
		Table: work.Table{
			From: "auditor.schedule s", Lock: "s", ID: "s.object", IDType: "text", Where: "s.parked_at IS NOT NULL",
			State: "'parked'", MovedAt: "s.parked_at", Reason: "s.parked_reason", Text: "s.parked_reason",
		},
		From: map[work.Verb][]string{work.Retry: {"parked"}, work.Release: {"parked"}},
	}
	checks.Do = func(ctx context.Context, tx pgx.Tx, v work.Verb, objects []string, note work.Note) (func(context.Context), error) {
		if _, err := tx.Exec(ctx, `UPDATE auditor.schedule SET parked_at = NULL, parked_reason = NULL WHERE object = ANY($1)`, objects); err != nil {
			return nil, err
		}
		return a.checkAfter(objects, note), nil
	}
	return &work.Store{DB: a.db, Schema: migrations.Schema.Name, Sources: []work.Source{requests, repairs, checks}}
}

// checkAfter checks objects now, once an action committed; a check that
// cannot be queued is the schedule's or the audit queue's next attempt's.
func (a *Auditor) checkAfter(objects []string, note work.Note) func(context.Context) {
	return func(ctx context.Context) {
		for _, o := range objects {
			if err := a.checkChanged(ctx, o, fmt.Sprintf("action:%d", note.Action)); err != nil {
				a.log.WarnContext(ctx, "an operator's retried check was not queued", "object", o, "action", note.Action, "err", err)
			}
		}
	}
}

// workHistory is what operators' actions did to the check of object and
// to its requests and repairs (their newest 20 each).
func (a *Auditor) workHistory(ctx context.Context, q work.Querier, object string) ([]service.HistoryEvent, error) {
	rows, err := q.Query(ctx, `SELECT 'audit/check/' || $1
		UNION ALL (SELECT 'audit/request/' || id FROM auditor.audit_queue WHERE object = $1 ORDER BY id DESC LIMIT 20)
		UNION ALL (SELECT 'audit/repair/' || id FROM auditor.resolution_tasks WHERE object = $1 ORDER BY id DESC LIMIT 20)`, object)
	if err != nil {
		return nil, fmt.Errorf("work items of %s: %w", object, err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("work items of %s: %w", object, err)
	}
	var out []service.HistoryEvent
	for _, ref := range refs {
		evs, err := work.History(ctx, q, migrations.Schema.Name, ref)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			e.Detail = ref + ": " + e.Detail
			out = append(out, e)
		}
	}
	return out, nil
}
