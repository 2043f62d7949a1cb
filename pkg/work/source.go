package work

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Source is one kind of item of one pipeline: how its rows read as items,
// and what each verb does to them.
type Source interface {
	// Pipeline and Kind name the items (ingest and job, say).
	Pipeline() string
	Kind() string
	// Verbs are the verbs the items take, in some state.
	Verbs() []Verb
	// Find returns up to limit items f matches that come after a in the
	// order items are listed: the latest moved first, then the highest id.
	Find(ctx context.Context, q Querier, f Filter, a After, limit int) ([]Item, error)
	// Select returns the ids of up to limit items f matches that v would
	// move now, in id order; locked against other transactions when tx
	// is one that acts.
	Select(ctx context.Context, q Querier, v Verb, f Filter, lock bool, limit int) ([]string, error)
	// Apply moves ids by v in tx, writing each item's history with note (who
	// acted, and the action's number). It returns what to do once tx
	// committed (wake a daemon, say), or nil.
	Apply(ctx context.Context, tx pgx.Tx, v Verb, ids []string, note Note) (func(context.Context), error)
}

// Note is what an action writes into each item's history.
type Note struct {
	// Action is the action's number in the action log.
	Action int64
	// Actor is who acted.
	Actor string
}

// String is the note as a history's detail.
func (n Note) String() string { return fmt.Sprintf("work action %d by %s", n.Action, n.Actor) }

// After is where a page of one source starts: after the item that ended
// the previous page, in the order items are listed (moved_at descending,
// then pipeline/kind descending, then the source's id descending).
type After struct {
	// Set is false on the first page.
	Set bool
	// At is the moved_at of the item that ended the previous page.
	At time.Time
	// Tie says which of this source's items that moved at At come after
	// it: all of them (the previous item sorts above this source), none
	// (it sorts below), or those with an id below ID (it was this
	// source's).
	Tie Tie
	// ID is the previous item's id when Tie is TieBelowID.
	ID string
}

// Tie is which items at After.At come after the previous page.
type Tie int

// The ties.
const (
	TieAll Tie = iota
	TieNone
	TieBelowID
)

// Table says how a PostgreSQL table's rows read as items: each field an SQL
// expression over From ("" where the item has no such thing). SQLSource
// writes its queries from it.
type Table struct {
	// From is the table (and joins) with the alias the expressions use.
	From string
	// Lock is the alias FOR UPDATE locks (the item's own table).
	Lock string
	// ID is the item's id; IDType is its SQL type (bigint or text).
	ID, IDType string
	// State and MovedAt are the item's state and when it entered it:
	// indexed together as (state, moved_at, id) and (moved_at, id), so
	// that a page is a range of an index.
	State, MovedAt string
	// CreatedAt is when it was made.
	CreatedAt string
	// Attempts, NextAttemptAt, Reason and Holder are the failure model's
	// columns.
	Attempts, NextAttemptAt, Reason, Holder string
	// Submitter and Collection are the depositor and the collection.
	Submitter, Collection string
	// Keys are the other names an item is known by, each an indexed
	// expression that Filter.Query matches exactly.
	Keys []string
	// Text is the failure's text, searched by words through the index
	// on to_tsvector('simple', Text).
	Text string
	// Where, if set, is always true of the table's items.
	Where string
	// Open are the states of work waiting or at work (the backlog), Done
	// those it leaves the queue by; Arrived, if set, is an indexed column
	// of when an item arrived. Rates reads them (none Open: no rates).
	Open, Done []string
	Arrived    string
}

// SQLSource is a Source over a Table: the kit writes the queries, the
// pipeline says which states each verb moves from and how it moves them.
type SQLSource struct {
	PipelineName, KindName string
	Table                  Table
	// From are the states each verb moves an item from.
	From map[Verb][]string
	// Only, for a verb, is a further condition an item must meet to be
	// moved by it (a requeued job must have a step to restart at).
	Only map[Verb]string
	// Do moves ids by v (they were selected from v's From states, and are
	// locked).
	Do func(ctx context.Context, tx pgx.Tx, v Verb, ids []string, note Note) (func(context.Context), error)
}

// Pipeline names the pipeline.
func (s *SQLSource) Pipeline() string { return s.PipelineName }

// Kind names the kind of item.
func (s *SQLSource) Kind() string { return s.KindName }

// Verbs are the verbs with states to move from, in Verbs' order.
func (s *SQLSource) Verbs() []Verb {
	var out []Verb
	for _, v := range Verbs {
		if len(s.From[v]) > 0 {
			out = append(out, v)
		}
	}
	return out
}

// where writes the conditions of f over the table; args continue from
// those given.
func (s *SQLSource) where(f Filter, args []any) (string, []any, bool) {
	t := s.Table
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var conds []string
	if t.Where != "" {
		conds = append(conds, t.Where)
	}
	if f.ID != "" {
		if t.IDType == "bigint" {
			n, err := strconv.ParseInt(f.ID, 10, 64)
			if err != nil {
				return "", nil, false
			}
			conds = append(conds, t.ID+" = "+arg(n))
		} else {
			conds = append(conds, t.ID+" = "+arg(f.ID))
		}
	}
	if len(f.States) > 0 {
		conds = append(conds, t.State+" = ANY("+arg(f.States)+"::text[])")
	}
	for _, c := range []struct{ col, v string }{{t.Submitter, f.Submitter}, {t.Collection, f.Collection}} {
		if c.v == "" {
			continue
		}
		if c.col == "" {
			// The items have no depositor (or collection): none is
			// anyone's in particular.
			return "", nil, false
		}
		conds = append(conds, c.col+" = "+arg(c.v))
	}
	if f.OlderThan > 0 {
		conds = append(conds, t.MovedAt+" <= now() - "+arg(f.OlderThan)+"::interval")
	}
	if f.Query != "" {
		var any []string
		if t.IDType == "bigint" {
			if n, err := strconv.ParseInt(f.Query, 10, 64); err == nil {
				any = append(any, t.ID+" = "+arg(n))
			}
		} else {
			any = append(any, t.ID+" = "+arg(f.Query))
		}
		for _, k := range t.Keys {
			any = append(any, k+" = "+arg(f.Query))
		}
		if t.Text != "" {
			any = append(any, "to_tsvector('simple', "+t.Text+") @@ plainto_tsquery('simple', "+arg(f.Query)+")")
		}
		if len(any) == 0 {
			return "", nil, false
		}
		conds = append(conds, "("+strings.Join(any, " OR ")+")")
	}
	if len(conds) == 0 {
		return "true", args, true
	}
	return strings.Join(conds, " AND "), args, true
}

// expr is e, or a typed NULL where the item has no such thing.
func expr(e, typ string) string {
	if e == "" {
		return "NULL::" + typ
	}
	return e
}

// Find lists a page of the table's items.
func (s *SQLSource) Find(ctx context.Context, q Querier, f Filter, a After, limit int) ([]Item, error) {
	t := s.Table
	cond, args, ok := s.where(f, nil)
	if !ok {
		return nil, nil
	}
	if a.Set {
		args = append(args, a.At)
		at := "$" + strconv.Itoa(len(args))
		switch a.Tie {
		case TieAll:
			cond += " AND " + t.MovedAt + " <= " + at
		case TieNone:
			cond += " AND " + t.MovedAt + " < " + at
		case TieBelowID:
			args = append(args, a.ID)
			cond += " AND (" + t.MovedAt + ", " + t.ID + ") < (" + at + ", $" + strconv.Itoa(len(args)) + "::" + t.IDType + ")"
		}
	}
	keys := "ARRAY[]::text[]"
	if len(t.Keys) > 0 {
		keys = "array_remove(ARRAY[" + strings.Join(t.Keys, ", ") + "]::text[], '')"
	}
	args = append(args, limit)
	sql := fmt.Sprintf(`SELECT %s::text, %s, coalesce(%s, 0)::int, %s, coalesce(%s, ''), coalesce(%s, ''), %s, %s,
		coalesce(%s, ''), coalesce(%s, ''), %s
		FROM %s WHERE %s ORDER BY %s DESC, %s DESC LIMIT $%d`,
		t.ID, t.State, expr(t.Attempts, "int"), expr(t.NextAttemptAt, "timestamptz"), expr(t.Reason, "text"), expr(t.Holder, "text"),
		t.MovedAt, expr(t.CreatedAt, "timestamptz"), expr(t.Submitter, "text"), expr(t.Collection, "text"), keys,
		t.From, cond, t.MovedAt, t.ID, len(args))
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("find %s %ss: %w", s.PipelineName, s.KindName, err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		it := Item{Pipeline: s.PipelineName, Kind: s.KindName}
		var created *time.Time
		err := row.Scan(&it.ID, &it.State, &it.Attempts, &it.NextAttemptAt, &it.Reason, &it.Holder, &it.MovedAt, &created,
			&it.Submitter, &it.Collection, &it.Keys)
		if created != nil {
			it.CreatedAt = *created
		}
		if it.NextAttemptAt != nil && (it.NextAttemptAt.IsZero() || it.NextAttemptAt.Year() < 1970) {
			it.NextAttemptAt = nil
		}
		for _, v := range Verbs {
			if slices.Contains(s.From[v], it.State) {
				it.Verbs = append(it.Verbs, v)
			}
		}
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("find %s %ss: %w", s.PipelineName, s.KindName, err)
	}
	return items, nil
}

// Select returns the ids of the items f matches that v moves now.
func (s *SQLSource) Select(ctx context.Context, q Querier, v Verb, f Filter, lock bool, limit int) ([]string, error) {
	from := s.From[v]
	if len(from) == 0 {
		return nil, nil
	}
	t := s.Table
	cond, args, ok := s.where(f, []any{from, limit})
	if !ok {
		return nil, nil
	}
	if only := s.Only[v]; only != "" {
		cond += " AND " + only
	}
	sql := fmt.Sprintf(`SELECT %s::text FROM %s WHERE %s = ANY($1::text[]) AND %s ORDER BY %s LIMIT $2`, t.ID, t.From, t.State, cond, t.ID)
	if lock {
		sql += " FOR UPDATE OF " + t.Lock
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("select %s %ss to %s: %w", s.PipelineName, s.KindName, v, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("select %s %ss to %s: %w", s.PipelineName, s.KindName, v, err)
	}
	return ids, nil
}

// Apply moves ids by the pipeline's Do.
func (s *SQLSource) Apply(ctx context.Context, tx pgx.Tx, v Verb, ids []string, note Note) (func(context.Context), error) {
	return s.Do(ctx, tx, v, ids, note)
}

// Int64s reads ids a bigint-keyed source selected.
func Int64s(ids []string) ([]int64, error) {
	out := make([]int64, len(ids))
	for i, id := range ids {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("id %q: %w", id, err)
		}
		out[i] = n
	}
	return out, nil
}
