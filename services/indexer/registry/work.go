package registry

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/work"
)

// WorkSources are the registry's archive files as the work kit's items
// (pkg/work): found by status, age, name, output or the words of their
// last error; retried (a failed or parked file indexed again from the
// start, its failures forgotten), released (a parked one), requeued (an
// indexed one indexed again) and skipped (parked until released) by the
// operator's verbs. wake is called once an action committed.
func (r *Registry) WorkSources(wake func()) []work.Source {
	src := &work.SQLSource{PipelineName: "index", KindName: "file",
		Table: work.Table{
			From: "indexer.files f", Lock: "f", ID: "f.name", IDType: "text",
			State: "f.status", MovedAt: "f.status_at", CreatedAt: "f.discovered_at",
			Attempts:      "f.failures",
			NextAttemptAt: "CASE WHEN f.next_attempt_at > now() THEN f.next_attempt_at END",
			Reason:        "nullif(f.last_error, '')",
			Keys:          []string{"f.output"},
			Text:          "f.last_error",
			Open:          []string{"new", "queued", "indexing"}, Done: []string{"indexed"}, Arrived: "f.discovered_at",
		},
		From: map[work.Verb][]string{
			work.Retry:   {"failed", "parked"},
			work.Release: {"parked"},
			work.Requeue: {"indexed", "failed", "parked"},
			work.Skip:    {"new", "failed"},
		},
	}
	src.Do = func(ctx context.Context, tx pgx.Tx, v work.Verb, names []string, note work.Note) (func(context.Context), error) {
		var err error
		switch v {
		case work.Retry, work.Release, work.Requeue:
			_, err = tx.Exec(ctx, resetSQL+` WHERE name = ANY($1)`, names)
		case work.Skip:
			_, err = tx.Exec(ctx, `UPDATE indexer.files SET status = 'parked', status_at = now(), last_error = $2,
				next_attempt_at = '-infinity' WHERE name = ANY($1)`, names, "skipped by an operator ("+note.String()+")")
		default:
			err = fmt.Errorf("a file takes no %s", v)
		}
		if err != nil {
			return nil, err
		}
		return func(context.Context) { wake() }, nil
	}
	return []work.Source{src}
}

// Work is the indexer's work for the kit's routes: the files, and the
// action log in the indexer's schema.
func (r *Registry) Work(wake func()) *work.Store {
	return &work.Store{DB: r.db, Schema: "indexer", Sources: r.WorkSources(wake)}
}
