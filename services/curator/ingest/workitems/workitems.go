// Package workitems is ingest's batches and jobs as the work kit's items
// (pkg/work).
package workitems

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/curator/ingest"
)

// Sources are ingest's batches and jobs as the work kit's items
// (pkg/work): found by state, collection, depositor, age, ARK, local id,
// payload URL or the words of their error, and moved by the operator's
// verbs through the transition table's admin moves (Act), each move in
// the item's history with the action's number.
func Sources(s *ingest.Store) []work.Source {
	jobs := &work.SQLSource{PipelineName: "ingest", KindName: "job",
		Table: work.Table{
			From: "curator.jobs j", Lock: "j", ID: "j.id", IDType: "bigint",
			State: "j.state", MovedAt: "j.state_at", CreatedAt: "j.created_at",
			Attempts:      "j.attempts",
			NextAttemptAt: "CASE WHEN j.next_attempt_at > now() THEN j.next_attempt_at END",
			Reason:        "coalesce(nullif(j.error, ''), j.last_attempt_error)",
			Submitter:     "j.submitter", Collection: "j.profile",
			Keys: []string{"j.ark", "j.local_id", "j.payload_url"},
			Text: "j.error || ' ' || j.last_attempt_error",
			Open: statesExcept(ingest.Job, ingest.Held, ingest.Completed, ingest.Failed, ingest.Deleted),
			Done: []string{string(ingest.Completed), string(ingest.Failed), string(ingest.Deleted)}, Arrived: "j.created_at",
		},
		From: fromStates(ingest.Job),
		Only: map[work.Verb]string{
			// A failed job restarts after its last successful step, which
			// the table must name.
			work.Retry:   requeuable,
			work.Requeue: requeuable,
		},
	}
	jobs.Do = workDo(s, ingest.Job)
	batches := &work.SQLSource{PipelineName: "ingest", KindName: "batch",
		Table: work.Table{
			From: "curator.batches b", Lock: "b", ID: "b.id", IDType: "bigint",
			State: "b.state", MovedAt: "b.state_at", CreatedAt: "b.created_at",
			Attempts:      "b.attempts",
			NextAttemptAt: "CASE WHEN b.next_attempt_at > now() THEN b.next_attempt_at END",
			Reason:        "coalesce(nullif(b.error, ''), b.last_attempt_error)",
			Submitter:     "b.submitter", Collection: "b.profile",
			Keys: []string{"b.payload_url"},
			Text: "b.error || ' ' || b.last_attempt_error",
			Open: statesExcept(ingest.Batch, ingest.Held, ingest.Completed, ingest.Failed, ingest.Deleted),
			Done: []string{string(ingest.Completed), string(ingest.Failed), string(ingest.Deleted)}, Arrived: "b.created_at",
		},
		From: fromStates(ingest.Batch),
		Only: map[work.Verb]string{
			// A batch is deleted only when none of its jobs is at work.
			work.Delete: fmt.Sprintf(`NOT EXISTS (SELECT FROM curator.jobs x WHERE x.batch_id = b.id AND x.state <> ALL('{%s}'))`, joinStates(ingest.DeletableJobStates)),
		},
	}
	batches.Do = workDo(s, ingest.Batch)
	return []work.Source{jobs, batches, mails()}
}

// mails are the collections' mails in the outbox: found by state
// (queued, retrying, parked), collection, depositor (their batch's),
// recipient, subject words or error; a parked one is sent again (resend)
// or dropped (delete).
func mails() work.Source {
	src := &work.SQLSource{PipelineName: "mail", KindName: "mail",
		Table: work.Table{
			From: "curator.mail_outbox m LEFT JOIN curator.batches b ON b.id = m.batch_id", Lock: "m", ID: "m.id", IDType: "bigint",
			State: "m.work_state", MovedAt: "m.state_at", CreatedAt: "m.created_at",
			Attempts:      "m.attempts",
			NextAttemptAt: "CASE WHEN m.parked_at IS NULL AND m.next_attempt_at > now() THEN m.next_attempt_at END",
			Reason:        "nullif(m.last_error, '')",
			Submitter:     "b.submitter", Collection: "b.profile",
			Keys: []string{"m.batch_id::text", "m.message_id"},
			Text: "m.subject || ' ' || m.last_error",
		},
		From: map[work.Verb][]string{work.Resend: {"parked"}, work.Delete: {"parked"}},
	}
	src.Do = func(ctx context.Context, tx pgx.Tx, v work.Verb, ids []string, note work.Note) (func(context.Context), error) {
		nums, err := work.Int64s(ids)
		if err != nil {
			return nil, err
		}
		switch v {
		case work.Resend:
			_, err = tx.Exec(ctx, `UPDATE curator.mail_outbox SET parked_at = NULL, first_failed_at = NULL, attempts = 0,
				last_error = '', next_attempt_at = now() WHERE id = ANY($1)`, nums)
		case work.Delete:
			_, err = tx.Exec(ctx, `DELETE FROM curator.mail_outbox WHERE id = ANY($1)`, nums)
		default:
			err = fmt.Errorf("a mail takes no %s", v)
		}
		return nil, err
	}
	return src
}

// requeuable is true of a job whose last successful state has a next step
// the table lets a requeue restart at.
var requeuable = func() string {
	var lasts []ingest.State
	for _, t := range ingest.AdminMoves(ingest.Job, "requeue") {
		for i, st := range ingest.JobSteps {
			if st == t.To && i > 0 {
				lasts = append(lasts, ingest.JobSteps[i-1])
			}
		}
	}
	return fmt.Sprintf("j.last_successful = ANY('{%s}')", joinStates(lasts))
}()

// statesExcept are the states of e's transitions but those given.
func statesExcept(e ingest.Entity, not ...ingest.State) []string {
	var out []string
	for _, t := range ingest.Transitions {
		for _, st := range []ingest.State{t.From, t.To} {
			if t.Entity == e && !slices.Contains(not, st) && !slices.Contains(out, string(st)) {
				out = append(out, string(st))
			}
		}
	}
	return out
}

// fromStates are the states each verb moves e from: those its admin
// action (verbActions) moves from in the transition table.
func fromStates(e ingest.Entity) map[work.Verb][]string {
	out := map[work.Verb][]string{}
	for v, action := range verbActions[e] {
		out[v] = statesOf(e, action)
	}
	return out
}

// statesOf are the states an admin action moves e from.
func statesOf(e ingest.Entity, action string) []string {
	var out []string
	for _, t := range ingest.AdminMoves(e, action) {
		out = append(out, string(t.From))
	}
	return out
}

func joinStates(states []ingest.State) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ",")
}

// verbActions are the admin actions the work verbs name (a batch's retry
// reports a failed batch again, after its failed jobs were requeued or
// deleted).
var verbActions = map[ingest.Entity]map[work.Verb]string{
	ingest.Job:   {work.Retry: "requeue", work.Requeue: "requeue", work.Release: "release", work.Hold: "hold", work.Delete: "delete"},
	ingest.Batch: {work.Release: "release", work.Delete: "delete", work.Retry: "update-reporting"},
}

// workDo moves the selected batches or jobs by the verb's admin action, as
// Act does one; the bulk action's confirmed count is the confirmation a
// job's deletion asks for.
func workDo(s *ingest.Store, e ingest.Entity) func(ctx context.Context, tx pgx.Tx, v work.Verb, ids []string, note work.Note) (func(context.Context), error) {
	return func(ctx context.Context, tx pgx.Tx, v work.Verb, ids []string, note work.Note) (func(context.Context), error) {
		action, ok := verbActions[e][v]
		if !ok {
			return nil, fmt.Errorf("%s takes no %s", e, v)
		}
		nums, err := work.Int64s(ids)
		if err != nil {
			return nil, err
		}
		tos := make([]ingest.State, len(nums))
		for i, id := range nums {
			if tos[i], err = s.ActIn(ctx, tx, e, id, action, true, note.String()); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context) {
			for i, id := range nums {
				// A batch left unchecked is the sweep's.
				_ = s.Acted(ctx, e, id, tos[i])
			}
		}, nil
	}
}
