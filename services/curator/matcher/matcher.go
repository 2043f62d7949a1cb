// Package matcher is the curator's matcher stage (matcher-versioning.txt):
// on each source update it stores the record, reads the latest state of every
// record linked to it, computes the connected components of same-as links
// (the work graphs) that the update touches, stores them, and returns one
// match result per affected graph, stamped with the matcher's time while it
// still holds the graph.
//
// Concurrent updates to overlapping graphs are serialised by row locks on
// the graph's nodes (curator.match_nodes), always taken in key order; a
// transaction that finds its graph larger than what it locked starts over
// with the larger set, so no two transactions wait on each other in a cycle.
package matcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
)

// Result is one affected graph: the envelope to publish on
// events.SubjectGraphMatched. Its SentAt is the matcher's time.
type Result struct {
	Envelope events.Envelope
	Graph    events.GraphMatched
}

// Matcher stores source records and matches them into graphs.
type Matcher struct {
	db       *pgxpool.Pool
	cat      *catalog.Catalog
	producer string
	// trusted are the sources whose links to others' records count
	// without a link back.
	trusted map[string]bool
	// maxPriority is the highest priority a source's records keep, by
	// source ("" for any other).
	maxPriority map[string]int32
}

// Option configures a Matcher.
type Option func(*Matcher)

// TrustedLinkers names the sources whose same-as links to another
// source's records count without a link back (a catalogue the archive
// keeps, say). Any other source's link to another source's record counts
// only once that record links back: no source takes over another's work.
func TrustedLinkers(sources ...string) Option {
	return func(m *Matcher) {
		for _, s := range sources {
			if s = strings.TrimSpace(s); s != "" {
				m.trusted[s] = true
			}
		}
	}
}

// MaxPriority clamps the priority of a source's records: limits by source,
// and def for every other (research leases go by priority, so one source
// asking for 2^31-1 would starve every other's).
func MaxPriority(def int32, limits map[string]int32) Option {
	return func(m *Matcher) {
		m.maxPriority[""] = def
		for s, p := range limits {
			m.maxPriority[s] = p
		}
	}
}

// New returns a matcher storing records through cat; producer names it on
// the results.
func New(cat *catalog.Catalog, producer string, opts ...Option) *Matcher {
	m := &Matcher{db: cat.DB(), cat: cat, producer: producer, trusted: map[string]bool{}, maxPriority: map[string]int32{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// clamp bounds rec's priority by its source's limit.
func (m *Matcher) clamp(rec *catalog.Record) {
	limit, ok := m.maxPriority[rec.Source]
	if !ok {
		limit, ok = m.maxPriority[""]
	}
	if ok && rec.Priority > limit {
		rec.Priority = limit
	}
}

// sourceOf is the source of a record key (source:id).
func sourceOf(key string) string {
	s, _, _ := strings.Cut(key, ":")
	return s
}

// Unreciprocated is the reason kept for a link to another source's record
// that has not linked back (and whose source is no trusted linker).
const Unreciprocated = "a link to another source's record counts once that record links back, or its source is a trusted linker (CURATOR_TRUSTED_LINKERS)"

// maxRounds bounds how often a transaction starts over because its graph grew.
const maxRounds = 20

var errGrew = errors.New("graph grew beyond its locks")

// ApplyGroup stores a group of records of one kind with distinct keys
// under the versioning rule and recomputes their graphs, in one
// transaction: the records are stored with one statement,
// their neighbourhood read with one query a step of its walk, linked in
// memory one after the other in the order given (as if each had its own
// transaction), and the graphs they touch stored and stamped once. It
// recomputes a record's graph even when the record is a replay or stale:
// a redelivered update whose results were not published before a crash
// publishes them now. It returns each record's outcome and the results of
// every graph touched (a group of one: one record's).
func (m *Matcher) ApplyGroup(ctx context.Context, recs []catalog.Record) ([]catalog.Outcome, []Result, error) {
	if len(recs) == 0 {
		return nil, nil, nil
	}
	kind := recs[0].Kind
	keys := make([]string, len(recs))
	locks := map[string]bool{}
	for i := range recs {
		if recs[i].Kind != kind {
			return nil, nil, fmt.Errorf("match a group of %s records: %s is a %s", kind, recs[i].Key(), recs[i].Kind)
		}
		m.clamp(&recs[i])
		keys[i] = recs[i].Key()
		locks[keys[i]] = true
		for _, k := range recs[i].SameAs {
			locks[k] = true
		}
	}
	// Start with the records' current links too (unlinking must lock
	// them), and every node that shares a stored graph with one to lock:
	// the graphs the group touches, as far as they are known before it,
	// so that few groups start over for a graph larger than their locks
	// (read planned for these keys, as a group's statements are).
	if err := catalog.InGroup(ctx, m.db, func(tx pgx.Tx) error {
		cur, err := catalog.GetMany(ctx, tx, kind, keys)
		if err != nil {
			return err
		}
		for _, r := range cur {
			for _, k := range r.SameAs {
				locks[k] = true
			}
		}
		rows, err := tx.Query(ctx, `SELECT key FROM curator.match_nodes WHERE kind = $1 AND graph IN
			(SELECT graph FROM curator.match_nodes WHERE kind = $1 AND key = ANY($2))`, string(kind), sortedKeys(locks))
		if err != nil {
			return fmt.Errorf("the stored graphs of %d records: %w", len(keys), err)
		}
		mates, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("the stored graphs of %d records: %w", len(keys), err)
		}
		for _, k := range mates {
			locks[k] = true
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	var outcomes []catalog.Outcome
	results, err := m.match(ctx, kind, keys, locks, func(tx pgx.Tx, h *hood) error {
		var err error
		if outcomes, err = m.cat.UpsertMany(ctx, tx, recs); err != nil {
			return err
		}
		var seeds []string
		for _, r := range recs {
			seeds = append(seeds, r.SameAs...)
		}
		if err := h.load(ctx, tx, append(seeds, keys...)); err != nil {
			return err
		}
		for i, r := range recs {
			if outcomes[i] == catalog.Applied {
				h.link(keys[i], r.SameAs, m.trusted)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return outcomes, results, nil
}

// Rematch recomputes and re-stamps the graph of key without changing any
// record: the repair an operator reaches for after a lost match result.
func (m *Matcher) Rematch(ctx context.Context, kind catalog.Kind, key string) ([]Result, error) {
	return m.match(ctx, kind, []string{key}, map[string]bool{key: true}, nil)
}

// match runs change (if any: it changes the database, then reads its part
// of the neighbourhood and changes that in memory) and recomputes the
// graphs of keys in one transaction holding the locks of every node it
// touches, starting over with more locks while the graphs reach beyond
// them.
func (m *Matcher) match(ctx context.Context, kind catalog.Kind, keys []string, locks map[string]bool, change func(pgx.Tx, *hood) error) ([]Result, error) {
	for range maxRounds {
		var results []Result
		var need []string
		err := catalog.InGroup(ctx, m.db, func(tx pgx.Tx) error {
			if err := lockNodes(ctx, tx, kind, sortedKeys(locks)); err != nil {
				return err
			}
			h := newHood(kind)
			if change != nil {
				if err := change(tx, h); err != nil {
					return err
				}
			}
			if err := h.load(ctx, tx, keys); err != nil {
				return err
			}
			comps, affected := h.affected(keys)
			for _, k := range affected {
				if !locks[k] {
					need = affected
					return errGrew
				}
			}
			if err := h.write(ctx, tx); err != nil {
				return err
			}
			var err error
			results, err = m.store(ctx, tx, kind, comps, affected, h.matchedAt)
			return err
		})
		if errors.Is(err, errGrew) {
			for _, k := range need {
				locks[k] = true
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("match %s %s: %w", kind, groupName(keys), err)
		}
		return results, nil
	}
	return nil, fmt.Errorf("match %s %s: graph kept growing for %d rounds (concurrent relinking); will retry", kind, groupName(keys), maxRounds)
}

// groupName names a group of keys in an error: the key, or the first and
// how many.
func groupName(keys []string) string {
	if len(keys) == 1 {
		return keys[0]
	}
	return fmt.Sprintf("%s and %d more", keys[0], len(keys)-1)
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lockNodes creates the nodes that do not exist yet and locks them all, in
// key order.
func lockNodes(ctx context.Context, tx pgx.Tx, kind catalog.Kind, keys []string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO curator.match_nodes (kind, key, graph)
		SELECT $1, k, k FROM unnest($2::text[]) AS k ORDER BY k
		ON CONFLICT DO NOTHING`, string(kind), keys); err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM curator.match_nodes
		WHERE kind = $1 AND key = ANY($2) ORDER BY key FOR UPDATE`, string(kind), keys); err != nil {
		return fmt.Errorf("lock nodes: %w", err)
	}
	return nil
}

// Refused is a same-as link the matcher did not store, and why.
type Refused struct {
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// RefusedLinks are the refused same-as links of a record (at most
// events.MaxSameAs).
func RefusedLinks(ctx context.Context, db *pgxpool.Pool, kind catalog.Kind, key string) ([]Refused, error) {
	var out []Refused
	err := refusedOf(ctx, db, kind, []string{key}, func(_, to, reason string, at time.Time) {
		out = append(out, Refused{To: to, Reason: reason, At: at})
	})
	return out, err
}

// refusedOf gives fn the refused same-as links of the records keys, in key
// order.
func refusedOf(ctx context.Context, q catalog.Querier, kind catalog.Kind, keys []string, fn func(from, to, reason string, at time.Time)) error {
	rows, err := q.Query(ctx, `SELECT from_key, to_key, reason, at FROM curator.match_refused
		WHERE kind = $1 AND from_key = ANY($2) ORDER BY from_key, to_key`, string(kind), keys)
	if err != nil {
		return fmt.Errorf("refused links of %v: %w", keys, err)
	}
	var from, to, reason string
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&from, &to, &reason, &at}, func() error {
		fn(from, to, reason, at)
		return nil
	}); err != nil {
		return fmt.Errorf("refused links of %v: %w", keys, err)
	}
	return nil
}

// Link is a same-as link the matcher stored: From's record names To; or,
// with By, an operator's merge of the two.
type Link struct {
	From string `json:"from"`
	To   string `json:"to"`
	// By is the operator's decision that made the link ("" for a
	// record's): who, and why.
	By string `json:"by,omitempty"`
}

// Refusal is a same-as link of From's record the matcher refused, and why.
type Refusal struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// GraphLinks are the links of the records keys that count (their own, and
// operators' merges among them), and those that do not: refused by the
// matcher, or of a record an operator split out, in key order.
func GraphLinks(ctx context.Context, q catalog.Querier, kind catalog.Kind, keys []string) ([]Link, []Refusal, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (l.from_key, l.to_key) l.from_key, l.to_key,
			coalesce('split out by ' || d.by || ': ' || d.reason, '')
		FROM curator.match_links l
		LEFT JOIN curator.operator_splits s ON s.kind = l.kind AND s.key IN (l.from_key, l.to_key)
		LEFT JOIN curator.curation_decisions d ON d.id = s.decision
		WHERE l.kind = $1 AND l.from_key = ANY($2)
		UNION ALL SELECT m.a, m.b, 'merged by ' || d.by || ': ' || d.reason
		FROM curator.operator_merges m JOIN curator.curation_decisions d ON d.id = m.decision
		WHERE m.kind = $1 AND (m.a = ANY($2) OR m.b = ANY($2))
		ORDER BY 1, 2`, string(kind), keys)
	if err != nil {
		return nil, nil, fmt.Errorf("links of %d records: %w", len(keys), err)
	}
	var links []Link
	var refused []Refusal
	var from, to, why string
	if _, err := pgx.ForEachRow(rows, []any{&from, &to, &why}, func() error {
		switch {
		case strings.HasPrefix(why, "split out by "):
			refused = append(refused, Refusal{From: from, To: to, Reason: why})
		default:
			links = append(links, Link{From: from, To: to, By: why})
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("links of %d records: %w", len(keys), err)
	}
	err = refusedOf(ctx, q, kind, keys, func(from, to, reason string, _ time.Time) {
		refused = append(refused, Refusal{From: from, To: to, Reason: reason})
	})
	return links, refused, err
}

// The operators' decisions (Decide).
const (
	// Merge joins the graphs of two records whatever their links say.
	Merge = "merge"
	// Unmerge takes back a merge.
	Unmerge = "unmerge"
	// Split takes a record out of its graph: no record's link to or from
	// it counts, its own or another's, until an operator takes it back
	// (an operator's merge of it, taken after, does).
	Split = "split"
	// Unsplit takes back a split.
	Unsplit = "unsplit"
)

// Decision is an operator's correction of the matcher, as recorded.
type Decision struct {
	ID     int64     `json:"id"`
	Kind   string    `json:"kind"`
	Action string    `json:"action"`
	A      string    `json:"a"`
	B      string    `json:"b,omitempty"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ErrBadDecision wraps a decision that cannot be taken as asked.
var ErrBadDecision = errors.New("bad decision")

// Decide records an operator's decision (d's Action, A, B for a merge, By
// and Reason) and matches A's graph again in the same transaction: the
// decision is in force, and the results to publish are returned, or
// neither. A split drops the merges A is in; a merge taken after a split
// counts (the split still holds for the records' own links). Decisions
// are kept: they survive every later update of the records, and
// Decisions lists them.
func (m *Matcher) Decide(ctx context.Context, d Decision) (Decision, []Result, error) {
	kind := catalog.Kind(d.Kind)
	switch {
	case kind != catalog.Episode && kind != catalog.Clip:
		return d, nil, fmt.Errorf("%w: kind %q, not episode or clip", ErrBadDecision, d.Kind)
	case strings.TrimSpace(d.Reason) == "":
		return d, nil, fmt.Errorf("%w: a decision needs a reason", ErrBadDecision)
	case (d.Action == Merge || d.Action == Unmerge) && (d.B == "" || d.A == d.B):
		return d, nil, fmt.Errorf("%w: %s takes two different records", ErrBadDecision, d.Action)
	case d.Action == Split || d.Action == Unsplit:
		d.B = ""
	case d.Action != Merge && d.Action != Unmerge:
		return d, nil, fmt.Errorf("%w: action %q, not merge, unmerge, split or unsplit", ErrBadDecision, d.Action)
	}
	a, b := d.A, d.B
	if b != "" && b < a {
		a, b = b, a
	}
	locks := map[string]bool{d.A: true}
	if d.B != "" {
		locks[d.B] = true
	}
	results, err := m.match(ctx, kind, []string{d.A}, locks, func(tx pgx.Tx, _ *hood) error {
		for _, k := range []string{a, b} {
			if k == "" {
				continue
			}
			if _, err := catalog.Get(ctx, tx, kind, k); errors.Is(err, catalog.ErrNotFound) {
				return fmt.Errorf("%w: no %s record %s", ErrBadDecision, kind, k)
			} else if err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, `INSERT INTO curator.curation_decisions (kind, action, a, b, by, reason)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, at`, string(kind), d.Action, d.A, d.B, d.By, d.Reason).Scan(&d.ID, &d.At); err != nil {
			return fmt.Errorf("record the decision: %w", err)
		}
		var err error
		switch d.Action {
		case Merge:
			_, err = tx.Exec(ctx, `INSERT INTO curator.operator_merges (kind, a, b, decision) VALUES ($1, $2, $3, $4)
				ON CONFLICT (kind, a, b) DO UPDATE SET decision = EXCLUDED.decision`, string(kind), a, b, d.ID)
		case Unmerge:
			_, err = tx.Exec(ctx, `DELETE FROM curator.operator_merges WHERE kind = $1 AND a = $2 AND b = $3`, string(kind), a, b)
		case Split:
			if _, err = tx.Exec(ctx, `DELETE FROM curator.operator_merges WHERE kind = $1 AND $2 IN (a, b)`, string(kind), a); err == nil {
				_, err = tx.Exec(ctx, `INSERT INTO curator.operator_splits (kind, key, decision) VALUES ($1, $2, $3)
					ON CONFLICT (kind, key) DO UPDATE SET decision = EXCLUDED.decision`, string(kind), a, d.ID)
			}
		case Unsplit:
			_, err = tx.Exec(ctx, `DELETE FROM curator.operator_splits WHERE kind = $1 AND key = $2`, string(kind), a)
		}
		if err != nil {
			return fmt.Errorf("put the decision in force: %w", err)
		}
		return nil
	})
	if err != nil {
		return d, nil, err
	}
	d.At = d.At.UTC()
	return d, results, nil
}

// Decisions are the operators' decisions about key, oldest first.
func Decisions(ctx context.Context, q catalog.Querier, kind catalog.Kind, key string) ([]Decision, error) {
	rows, err := q.Query(ctx, `SELECT id, kind, action, a, b, by, reason, at FROM curator.curation_decisions
		WHERE kind = $1 AND (a = $2 OR b = $2) ORDER BY id`, string(kind), key)
	if err != nil {
		return nil, fmt.Errorf("decisions about %s: %w", key, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Decision])
}

// store records the graphs and stamps them with the matcher's time: the
// database clock, so that every replica shares one clock, and strictly after
// any earlier stamp of these nodes, so that a later match of the same nodes
// is always newer.
func (m *Matcher) store(ctx context.Context, tx pgx.Tx, kind catalog.Kind, comps [][]string, affected []string, newest time.Time) ([]Result, error) {
	keys, graphs := make([]string, 0, len(affected)), make([]string, 0, len(affected))
	for _, comp := range comps {
		for _, k := range comp {
			keys, graphs = append(keys, k), append(graphs, comp[0])
		}
	}
	var stamp time.Time
	if err := tx.QueryRow(ctx, `WITH s AS MATERIALIZED (SELECT greatest(clock_timestamp(), $4::timestamptz + interval '1 microsecond') AS stamp)
		UPDATE curator.match_nodes n SET graph = u.graph, matched_at = s.stamp
		FROM unnest($2::text[], $3::text[]) AS u(key, graph), s
		WHERE n.kind = $1 AND n.key = u.key RETURNING s.stamp`, string(kind), keys, graphs, newest).Scan(&stamp); err != nil {
		return nil, fmt.Errorf("store %d graphs: %w", len(comps), err)
	}
	stamp = stamp.UTC().Truncate(time.Microsecond)
	results := make([]Result, 0, len(comps))
	for _, comp := range comps {
		r, err := m.result(string(kind), comp, stamp)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

// Lagging rebuilds the match results whose works the merger has not written
// (a result the bus lost, say): every stored graph with a node whose work
// row is missing or older than the graph's stamp. The results carry the
// original stamp and message id, so republishing them is idempotent. At most
// limit graphs are returned.
func (m *Matcher) Lagging(ctx context.Context, limit int) ([]Result, error) {
	rows, err := m.db.Query(ctx, `SELECT n.kind, n.graph, n.matched_at, array_agg(n.key ORDER BY n.key)
		FROM curator.match_nodes n
		WHERE n.matched_at IS NOT NULL AND (n.kind, n.graph, n.matched_at) IN (
			SELECT DISTINCT g.kind, g.graph, g.matched_at FROM curator.match_nodes g
			LEFT JOIN curator.works w ON w.kind = g.kind AND w.key = g.key
			WHERE g.matched_at IS NOT NULL AND (w.version IS NULL OR w.version < g.matched_at)
			LIMIT $1)
		GROUP BY n.kind, n.graph, n.matched_at`, limit)
	if err != nil {
		return nil, fmt.Errorf("lagging graphs: %w", err)
	}
	defer rows.Close()
	var out []Result
	for rows.Next() {
		var kind, graph string
		var stamp time.Time
		var members []string
		if err := rows.Scan(&kind, &graph, &stamp, &members); err != nil {
			return nil, fmt.Errorf("lagging graphs: %w", err)
		}
		r, err := m.result(kind, members, stamp.UTC())
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// result is the match result of a graph stamped at stamp; its message id is
// derived from both, so the same result published twice is stored once.
func (m *Matcher) result(kind string, members []string, stamp time.Time) (Result, error) {
	g := events.GraphMatched{Kind: kind, Members: members}
	env, err := events.NewAt(m.producer, stamp, &g)
	if err != nil {
		return Result{}, err
	}
	env.ID = fmt.Sprintf("match:%s:%s:%d", kind, members[0], stamp.UnixMicro())
	return Result{Envelope: env, Graph: g}, nil
}
