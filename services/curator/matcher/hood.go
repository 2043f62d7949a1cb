package matcher

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
)

// hood is the neighbourhood of a group of records in memory: every node
// reachable from them over same-as links (either way, counted or not),
// operators' merges and stored graphs, with those links and merges, the
// splits, the refusals of its nodes and their stored graphs. The matcher
// reads it in one query per step of the walk (not per node), links the
// group's records in it one after the other as if each had its own
// transaction, and writes the links and refusals that changed in one
// statement: a group of records costs about as many round trips as one
// record did.
type hood struct {
	kind    catalog.Kind
	loaded  map[string]bool
	out, in map[string]map[string]bool // same-as links, from -> to and to -> from
	merges  map[string]map[string]bool // operators' merges, both ways
	split   map[string]bool
	refused map[string]map[string]string // from -> to -> reason
	graph   map[string]string            // a node's stored graph
	mates   map[string][]string          // a stored graph's nodes
	// matchedAt is the newest stamp of a loaded node.
	matchedAt time.Time

	// What the walk read, to write only what changed.
	links0   map[[2]string]bool
	refused0 map[[2]string]string
}

func newHood(kind catalog.Kind) *hood {
	return &hood{kind: kind, loaded: map[string]bool{}, out: map[string]map[string]bool{}, in: map[string]map[string]bool{},
		merges: map[string]map[string]bool{}, split: map[string]bool{}, refused: map[string]map[string]string{},
		graph: map[string]string{}, mates: map[string][]string{}, links0: map[[2]string]bool{}, refused0: map[[2]string]string{}}
}

func add[V comparable](m map[string]map[string]V, a, b string, v V) {
	if m[a] == nil {
		m[a] = map[string]V{}
	}
	m[a][b] = v
}

// load reads the neighbourhood of start to its fixpoint, one query a step.
func (h *hood) load(ctx context.Context, tx pgx.Tx, start []string) error {
	frontier := h.unloaded(start)
	for len(frontier) > 0 {
		for _, k := range frontier {
			h.loaded[k] = true
		}
		rows, err := tx.Query(ctx, `SELECT 'l', from_key, to_key, '', NULL::timestamptz FROM curator.match_links
				WHERE kind = $1 AND from_key = ANY($2)
			UNION ALL SELECT 'l', from_key, to_key, '', NULL FROM curator.match_links
				WHERE kind = $1 AND to_key = ANY($2) AND NOT from_key = ANY($2)
			UNION ALL SELECT 'm', a, b, '', NULL FROM curator.operator_merges WHERE kind = $1 AND (a = ANY($2) OR b = ANY($2))
			UNION ALL SELECT 's', key, '', '', NULL FROM curator.operator_splits WHERE kind = $1 AND key = ANY($2)
			UNION ALL SELECT 'r', from_key, to_key, reason, NULL FROM curator.match_refused WHERE kind = $1 AND from_key = ANY($2)
			UNION ALL SELECT 'g', key, graph, '', matched_at FROM curator.match_nodes
				WHERE kind = $1 AND graph IN (SELECT graph FROM curator.match_nodes WHERE kind = $1 AND key = ANY($2))`,
			string(h.kind), frontier)
		if err != nil {
			return fmt.Errorf("the graphs of %d records: %w", len(frontier), err)
		}
		var next []string
		var tag, a, b, reason string
		var at *time.Time
		if _, err := pgx.ForEachRow(rows, []any{&tag, &a, &b, &reason, &at}, func() error {
			switch tag {
			case "l":
				add(h.out, a, b, true)
				add(h.in, b, a, true)
				h.links0[[2]string{a, b}] = true
				next = append(next, a, b)
			case "m":
				add(h.merges, a, b, true)
				add(h.merges, b, a, true)
				next = append(next, a, b)
			case "s":
				h.split[a] = true
			case "r":
				add(h.refused, a, b, reason)
				h.refused0[[2]string{a, b}] = reason
			case "g":
				if _, ok := h.graph[a]; !ok {
					h.graph[a] = b
					h.mates[b] = append(h.mates[b], a)
				}
				if at != nil && at.After(h.matchedAt) {
					h.matchedAt = *at
				}
				next = append(next, a)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("the graphs of %d records: %w", len(frontier), err)
		}
		frontier = h.unloaded(next)
	}
	return nil
}

// unloaded is keys less those loaded, without repeats.
func (h *hood) unloaded(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !h.loaded[k] && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// neighbours calls fn with the nodes x is joined to: by a link that counts
// (neither end split out) and by an operator's merge.
func (h *hood) neighbours(x string, fn func(string)) {
	if !h.split[x] {
		for y := range h.out[x] {
			if !h.split[y] {
				fn(y)
			}
		}
		for y := range h.in[x] {
			if !h.split[y] {
				fn(y)
			}
		}
	}
	for y := range h.merges[x] {
		fn(y)
	}
}

// componentUpTo is the connected component of start, stopping (over
// true) as soon as it has found more than limit records (0: no limit);
// the component is sorted.
func (h *hood) componentUpTo(start string, limit int) (comp []string, over bool) {
	seen := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		h.neighbours(x, func(y string) {
			if !seen[y] {
				seen[y] = true
				queue = append(queue, y)
			}
		})
		if limit > 0 && len(seen) > limit {
			return nil, true
		}
	}
	return sortedKeys(seen), false
}

func (h *hood) setLinks(key string, to []string) {
	for y := range h.out[key] {
		delete(h.in[y], key)
	}
	delete(h.out, key)
	for _, y := range to {
		add(h.out, key, y, true)
		add(h.in, y, key, true)
	}
}

func (h *hood) unlink(from, to string) {
	delete(h.out[from], to)
	delete(h.in[to], from)
}

// refuse records a refusal of from's link to to, keeping an earlier one.
func (h *hood) refuse(from, to, reason string) {
	if _, ok := h.refused[from][to]; !ok {
		add(h.refused, from, to, reason)
	}
}

// link replaces key's same-as links with those of sameAs that keep its
// graph within events.MaxGraphMembers records, in the order given: a link
// to a record already in the graph always; one that joins another graph
// while the two together stay within the cap. A link to another,
// untrusted source's record counts once that record links back. The
// others are refused with their reason (replacing the record's earlier
// refusals).
func (h *hood) link(key string, sameAs []string, trusted map[string]bool) {
	h.setLinks(key, nil)
	delete(h.refused, key)
	// Links of other, untrusted sources' records to this one counted
	// because it linked back: those it no longer links back to are
	// refused again, until it does.
	for from := range h.in[key] {
		if s := sourceOf(from); s != sourceOf(key) && !trusted[s] && !slices.Contains(sameAs, from) {
			h.unlink(from, key)
			h.refuse(from, key, Unreciprocated)
		}
	}
	if len(sameAs) == 0 {
		return
	}
	graph, full := h.componentUpTo(key, events.MaxGraphMembers)
	members := map[string]bool{key: true}
	for _, k := range graph {
		members[k] = true
	}
	var accepted, promoted []string
	refuse := func(to, reason string) { h.refuse(key, to, reason) }
	for _, to := range sameAs {
		// Another source's record: the link counts once it links back
		// (its link waits, refused; or counts already, its source
		// trusted), or when this source is trusted.
		backLink := false
		if sourceOf(to) != sourceOf(key) && !trusted[sourceOf(key)] {
			linked, waiting := h.out[to][key], h.refused[to][key] == Unreciprocated
			if !linked && !waiting {
				refuse(to, Unreciprocated)
				continue
			}
			backLink = waiting
		}
		if full {
			// Others' links already make the record's graph larger than
			// the cap (made before there was one): it links to nothing more.
			refuse(to, fmt.Sprintf("%s's graph already has more than %d records (events.MaxGraphMembers) through others' links", key, events.MaxGraphMembers))
			continue
		}
		if members[to] || slices.Contains(accepted, to) {
			accepted = append(accepted, to)
			continue
		}
		room := events.MaxGraphMembers - len(members)
		var other []string
		over := room <= 0 // a full graph takes no one (and a limit of 0 would be none)
		if !over {
			other, over = h.componentUpTo(to, room)
		}
		if over {
			refuse(to, fmt.Sprintf("the link would join %s's graph of %d records to %s's of more than %d: a work graph has at most %d records (events.MaxGraphMembers)",
				key, len(members), to, room, events.MaxGraphMembers))
			continue
		}
		for _, k := range other {
			members[k] = true
		}
		accepted = append(accepted, to)
		if backLink {
			promoted = append(promoted, to)
		}
	}
	h.setLinks(key, accepted)
	// The links back that waited count now too.
	for _, from := range promoted {
		delete(h.refused[from], key)
		add(h.out, from, key, true)
		add(h.in, key, from, true)
	}
}

// affected computes the graph of each of keys and of every node that
// shared a stored graph with a node of one (a node that leaves a graph
// leaves behind a graph that changed too), to a fixpoint. It returns the
// components and all their nodes, sorted.
func (h *hood) affected(keys []string) ([][]string, []string) {
	seen := map[string]bool{}
	var comps [][]string
	queue := slices.Clone(keys)
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if seen[x] {
			continue
		}
		comp, _ := h.componentUpTo(x, 0)
		comps = append(comps, comp)
		for _, k := range comp {
			seen[k] = true
		}
		for _, k := range comp {
			for _, mate := range h.mates[h.graph[k]] {
				if !seen[mate] {
					queue = append(queue, mate)
				}
			}
		}
	}
	return comps, sortedKeys(seen)
}

// write stores the links and refusals that changed since load, in one
// statement.
func (h *hood) write(ctx context.Context, tx pgx.Tx) error {
	var unlinkFrom, unlinkTo, linkFrom, linkTo, unrefuseFrom, unrefuseTo, refuseFrom, refuseTo, reasons []string
	for l := range h.links0 {
		if !h.out[l[0]][l[1]] {
			unlinkFrom, unlinkTo = append(unlinkFrom, l[0]), append(unlinkTo, l[1])
		}
	}
	for from, tos := range h.out {
		for to := range tos {
			if !h.links0[[2]string{from, to}] {
				linkFrom, linkTo = append(linkFrom, from), append(linkTo, to)
			}
		}
	}
	for r := range h.refused0 {
		if _, ok := h.refused[r[0]][r[1]]; !ok {
			unrefuseFrom, unrefuseTo = append(unrefuseFrom, r[0]), append(unrefuseTo, r[1])
		}
	}
	for from, tos := range h.refused {
		for to, reason := range tos {
			if was, ok := h.refused0[[2]string{from, to}]; !ok || was != reason {
				refuseFrom, refuseTo, reasons = append(refuseFrom, from), append(refuseTo, to), append(reasons, reason)
			}
		}
	}
	if len(unlinkFrom)+len(linkFrom)+len(unrefuseFrom)+len(refuseFrom) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `WITH unlinked AS (DELETE FROM curator.match_links l USING unnest($2::text[], $3::text[]) AS d(f, t)
			WHERE l.kind = $1 AND l.from_key = d.f AND l.to_key = d.t),
		linked AS (INSERT INTO curator.match_links (kind, from_key, to_key)
			SELECT $1, f, t FROM unnest($4::text[], $5::text[]) AS i(f, t) ORDER BY f, t ON CONFLICT DO NOTHING),
		unrefused AS (DELETE FROM curator.match_refused r USING unnest($6::text[], $7::text[]) AS d(f, t)
			WHERE r.kind = $1 AND r.from_key = d.f AND r.to_key = d.t)
		INSERT INTO curator.match_refused (kind, from_key, to_key, reason)
			SELECT $1, f, t, r FROM unnest($8::text[], $9::text[], $10::text[]) AS i(f, t, r) ORDER BY f, t
		ON CONFLICT (kind, from_key, to_key) DO UPDATE SET reason = EXCLUDED.reason, at = now()`,
		string(h.kind), unlinkFrom, unlinkTo, linkFrom, linkTo, unrefuseFrom, unrefuseTo, refuseFrom, refuseTo, reasons); err != nil {
		return fmt.Errorf("store links and refusals: %w", err)
	}
	return nil
}
