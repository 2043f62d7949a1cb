package work

import (
	"cmp"
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Schema is the kit's part of a service's schema (its action log), to list
// beside the service's own in its Definition.
func Schema(name string) store.Schema {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	return store.Schema{Name: name, Part: "work", Migrations: sub}
}

// Limits of one request.
const (
	// MaxPage is the most items a page lists.
	MaxPage = 500
	// MaxAction is the most items one action moves: a filter matching
	// more is refused at the dry run, and the operator narrows it (by
	// state, collection or age) or acts in turns.
	MaxAction = 100_000
	// maxLoggedItems is how many moved items an action's log entry names.
	maxLoggedItems = 1000
)

// Store is a service's work: its sources, and its action log in the
// schema's work_actions.
type Store struct {
	DB      *pgxpool.Pool
	Schema  string
	Sources []Source
}

// Page is a page of items, and the cursor of the next ("" on the last).
type Page struct {
	Items []Item `json:"items"`
	Next  string `json:"next,omitempty"`
}

// cursor is where a page ends: the last item's moved_at, pipeline/kind and
// id.
type cursor struct {
	At     time.Time
	Prefix string
	ID     string
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixMicro(), 10) + "\x00" + c.Prefix + "\x00" + c.ID))
}

func parseCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	parts := strings.SplitN(string(b), "\x00", 3)
	if err != nil || len(parts) != 3 {
		return cursor{}, &InvalidError{Field: "after", Msg: "not a cursor this API gave"}
	}
	us, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return cursor{}, &InvalidError{Field: "after", Msg: "not a cursor this API gave"}
	}
	return cursor{At: time.UnixMicro(us).UTC(), Prefix: parts[1], ID: parts[2]}, nil
}

// prefix is an item's or a source's pipeline/kind.
func prefix(pipeline, kind string) string { return pipeline + "/" + kind }

// after is where source s's page starts after c.
func (c cursor) after(s Source) After {
	p := prefix(s.Pipeline(), s.Kind())
	a := After{Set: true, At: c.At}
	switch {
	case p == c.Prefix:
		a.Tie, a.ID = TieBelowID, c.ID
	case p < c.Prefix:
		a.Tie = TieAll
	default:
		a.Tie = TieNone
	}
	return a
}

// SortItems puts items in the order pages list them: the latest moved
// first, then by pipeline/kind descending; items of one source keep their
// order (the source's, by id descending).
func SortItems(items []Item) {
	slices.SortStableFunc(items, func(a, b Item) int {
		if c := b.MovedAt.Compare(a.MovedAt); c != 0 {
			return c
		}
		return cmp.Compare(prefix(b.Pipeline, b.Kind), prefix(a.Pipeline, a.Kind))
	})
}

// pageOf cuts merged items to limit and makes the next page's cursor.
func pageOf(items []Item, limit int, more bool) Page {
	SortItems(items)
	if len(items) > limit {
		items, more = items[:limit], true
	}
	p := Page{Items: items}
	if more && len(items) > 0 {
		last := items[len(items)-1]
		p.Next = cursor{At: last.MovedAt, Prefix: prefix(last.Pipeline, last.Kind), ID: last.ID}.String()
	}
	if p.Items == nil {
		p.Items = []Item{}
	}
	return p
}

// limitOf checks a page size: 50 when 0.
func limitOf(limit int) (int, error) {
	if limit == 0 {
		return 50, nil
	}
	if limit < 0 || limit > MaxPage {
		return 0, &InvalidError{Field: "limit", Msg: fmt.Sprintf("%d, want 1 to %d", limit, MaxPage)}
	}
	return limit, nil
}

// Find lists the page of items f matches that starts after the cursor
// ("" for the first page).
func (s *Store) Find(ctx context.Context, f Filter, after string, limit int) (Page, error) {
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	limit, err := limitOf(limit)
	if err != nil {
		return Page{}, err
	}
	var c cursor
	if after != "" {
		if c, err = parseCursor(after); err != nil {
			return Page{}, err
		}
	}
	var items []Item
	more := false
	for _, src := range s.Sources {
		if !f.admits(src) {
			continue
		}
		var a After
		if after != "" {
			a = c.after(src)
		}
		got, err := src.Find(ctx, s.DB, f, a, limit)
		if err != nil {
			return Page{}, err
		}
		more = more || len(got) == limit
		items = append(items, got...)
	}
	return pageOf(items, limit, more), nil
}

// Count is what an action would move: the dry run.
type Count struct {
	Verb   Verb   `json:"verb"`
	Filter Filter `json:"filter"`
	// N is how many items it would move.
	N int `json:"count"`
	// ByKind counts them by pipeline/kind.
	ByKind map[string]int `json:"by_kind"`
	// Sample is the first of them (up to 20), ids only.
	Sample []string `json:"sample"`
}

// TooManyError is a filter matching more items than one action moves.
type TooManyError struct{ N int }

func (e *TooManyError) Error() string {
	return fmt.Sprintf("the filter matches more than %d items that would move: narrow it (a state, a collection, an age) or act in turns", MaxAction)
}

// MovedError is an action whose confirmed count is no longer what it
// would move: the operator looks again (a 409).
type MovedError struct{ Confirmed, Now int }

func (e *MovedError) Error() string {
	return fmt.Sprintf("the dry run counted %d, now %d items would move: run the dry run again and confirm its count", e.Confirmed, e.Now)
}

// NoVerbError is a verb that no item the filter admits takes.
type NoVerbError struct {
	Verb  Verb
	Takes []string
}

func (e *NoVerbError) Error() string {
	if len(e.Takes) == 0 {
		return fmt.Sprintf("%s: no work the filter names is moved by it here", e.Verb)
	}
	return fmt.Sprintf("%s: no work the filter names takes it; here: %s", e.Verb, strings.Join(e.Takes, "; "))
}

// selectAll selects, over every source f admits that takes v, what v moves.
func (s *Store) selectAll(ctx context.Context, q Querier, v Verb, f Filter, lock bool) (map[Source][]string, int, error) {
	out := map[Source][]string{}
	total, takers := 0, 0
	var takes []string
	for _, src := range s.Sources {
		if !f.admits(src) {
			continue
		}
		var names []string
		for _, sv := range src.Verbs() {
			names = append(names, string(sv))
		}
		takes = append(takes, prefix(src.Pipeline(), src.Kind())+" "+strings.Join(names, ", "))
		if !slices.Contains(src.Verbs(), v) {
			continue
		}
		takers++
		ids, err := src.Select(ctx, q, v, f, lock, MaxAction+1-total)
		if err != nil {
			return nil, 0, err
		}
		out[src] = ids
		total += len(ids)
		if total > MaxAction {
			return nil, 0, &TooManyError{N: total}
		}
	}
	if takers == 0 {
		return nil, 0, &NoVerbError{Verb: v, Takes: takes}
	}
	return out, total, nil
}

// DryRun counts what v would move of the items f matches, moving nothing.
func (s *Store) DryRun(ctx context.Context, v Verb, f Filter) (Count, error) {
	if err := f.Validate(); err != nil {
		return Count{}, err
	}
	sel, n, err := s.selectAll(ctx, s.DB, v, f, false)
	if err != nil {
		return Count{}, err
	}
	c := Count{Verb: v, Filter: f, N: n, ByKind: map[string]int{}, Sample: []string{}}
	for _, src := range s.Sources {
		ids, ok := sel[src]
		if !ok {
			continue
		}
		c.ByKind[prefix(src.Pipeline(), src.Kind())] = len(ids)
		for _, id := range ids {
			if len(c.Sample) < 20 {
				c.Sample = append(c.Sample, prefix(src.Pipeline(), src.Kind())+"/"+id)
			}
		}
	}
	return c, nil
}

// refused reports whether err refuses a request (a bad filter, too many
// items, a count that moved, a verb nothing takes) rather than failing it.
func refused(err error) bool {
	var moved *MovedError
	var inv *InvalidError
	var many *TooManyError
	var nv *NoVerbError
	return errors.As(err, &moved) || errors.As(err, &inv) || errors.As(err, &many) || errors.As(err, &nv)
}

// Action is one entry of the action log.
type Action struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Verb    Verb      `json:"verb"`
	Filter  Filter    `json:"filter"`
	Counted int       `json:"counted"`
	Moved   int       `json:"moved"`
	Outcome string    `json:"outcome"`
	Items   []string  `json:"items"`
	// Service is the service whose log holds it (filled by Client).
	Service string `json:"service,omitempty"`
}

// Act moves by v every item f matches, if what would move is still the
// count the actor confirmed (from a dry run); in one transaction, recorded
// in the action log whatever its outcome.
func (s *Store) Act(ctx context.Context, v Verb, f Filter, confirm int, actor string) (Action, error) {
	if err := f.Validate(); err != nil {
		return Action{}, err
	}
	a := Action{Actor: actor, Verb: v, Filter: f, Counted: confirm, Items: []string{}}
	var afters []func(context.Context)
	err := store.InTx(ctx, s.DB, func(tx pgx.Tx) error {
		sel, n, err := s.selectAll(ctx, tx, v, f, true)
		if err != nil {
			return err
		}
		if n != confirm {
			return &MovedError{Confirmed: confirm, Now: n}
		}
		if err := tx.QueryRow(ctx, `INSERT INTO `+pgx.Identifier{s.Schema, "work_actions"}.Sanitize()+
			` (actor, verb, filter, counted, outcome) VALUES ($1, $2, $3, $4, 'acting') RETURNING id, at`,
			actor, v, f, confirm).Scan(&a.ID, &a.At); err != nil {
			return fmt.Errorf("record the action: %w", err)
		}
		note := Note{Action: a.ID, Actor: actor}
		for _, src := range s.Sources {
			ids := sel[src]
			if len(ids) == 0 {
				continue
			}
			after, err := src.Apply(ctx, tx, v, ids, note)
			if err != nil {
				return fmt.Errorf("%s %s %ss: %w", v, src.Pipeline(), src.Kind(), err)
			}
			if after != nil {
				afters = append(afters, after)
			}
			refs := make([]string, len(ids))
			for i, id := range ids {
				refs[i] = prefix(src.Pipeline(), src.Kind()) + "/" + id
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{s.Schema, "work_action_items"}.Sanitize()+
				` (ref, action) SELECT unnest($1::text[]), $2`, refs, a.ID); err != nil {
				return fmt.Errorf("record the items moved: %w", err)
			}
			a.Moved += len(ids)
			for _, id := range ids {
				if len(a.Items) < maxLoggedItems {
					a.Items = append(a.Items, prefix(src.Pipeline(), src.Kind())+"/"+id)
				}
			}
		}
		a.Outcome = "done"
		_, err = tx.Exec(ctx, `UPDATE `+pgx.Identifier{s.Schema, "work_actions"}.Sanitize()+
			` SET moved = $2, outcome = $3, items = $4 WHERE id = $1`, a.ID, a.Moved, a.Outcome, a.Items)
		return err
	})
	if err != nil {
		// What was refused or failed is logged too: the log is of every
		// action asked for.
		a.ID, a.Moved, a.Items = 0, 0, []string{}
		a.Outcome = "refused: " + err.Error()
		if !refused(err) {
			a.Outcome = "failed: " + err.Error()
		}
		if lerr := s.DB.QueryRow(ctx, `INSERT INTO `+pgx.Identifier{s.Schema, "work_actions"}.Sanitize()+
			` (actor, verb, filter, counted, outcome) VALUES ($1, $2, $3, $4, $5) RETURNING id, at`,
			actor, v, f, confirm, a.Outcome).Scan(&a.ID, &a.At); lerr != nil {
			return a, errors.Join(err, fmt.Errorf("record the refused action: %w", lerr))
		}
		return a, err
	}
	for _, after := range afters {
		after(ctx)
	}
	return a, nil
}

// Actions lists the action log, newest first: up to limit entries before
// the entry numbered before (0 for the newest); by actor alone when actor
// is set.
func (s *Store) Actions(ctx context.Context, actor string, before int64, limit int) ([]Action, error) {
	limit, err := limitOf(limit)
	if err != nil {
		return nil, err
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.DB.Query(ctx, `SELECT id, at, actor, verb, filter, counted, moved, outcome, items FROM `+
		pgx.Identifier{s.Schema, "work_actions"}.Sanitize()+
		` WHERE id < $1 AND ($2 = '' OR actor = $2) ORDER BY id DESC LIMIT $3`, before, actor, limit)
	if err != nil {
		return nil, fmt.Errorf("action log: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Action, error) {
		var a Action
		var filter []byte
		err := row.Scan(&a.ID, &a.At, &a.Actor, &a.Verb, &filter, &a.Counted, &a.Moved, &a.Outcome, &a.Items)
		if err == nil {
			err = json.Unmarshal(filter, &a.Filter)
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("action log: %w", err)
	}
	if out == nil {
		out = []Action{}
	}
	return out, nil
}

// History is what actions did to the item ref (pipeline/kind/id) in the
// action log of schema: events for the item's history, oldest first.
func History(ctx context.Context, q Querier, schema, ref string) ([]service.HistoryEvent, error) {
	rows, err := q.Query(ctx, `SELECT a.at, a.verb, a.id, a.actor FROM `+pgx.Identifier{schema, "work_action_items"}.Sanitize()+` i
		JOIN `+pgx.Identifier{schema, "work_actions"}.Sanitize()+` a ON a.id = i.action WHERE i.ref = $1 ORDER BY a.id LIMIT $2`, ref, service.MaxHistoryEvents)
	if err != nil {
		return nil, fmt.Errorf("actions on %s: %w", ref, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (service.HistoryEvent, error) {
		var e service.HistoryEvent
		var verb string
		var n Note
		err := row.Scan(&e.At, &verb, &n.Action, &n.Actor)
		e.What, e.Detail = verb, n.String()
		return e, err
	})
}
