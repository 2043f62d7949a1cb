// Package merger is the curator's merger stage (matcher-versioning.txt): for
// each match result it builds one merged work from the latest state of the
// graph's source records, and writes a row for every key of the graph (the
// work, a redirect to it, or gone) with the matcher's time as the version:
// newer wins, equal is an idempotent replay, older is skipped and counted.
//
// # Merge rule
//
// The work's key is the smallest key of the graph that has a source record
// (so the work id does not move when precedence is reconfigured). Members
// are ordered by source precedence (the configured list, then unlisted
// sources by name), then by key, and the work's fields are:
//
//   - title: the first non-empty title in precedence order;
//   - media (key and sha256) and duration: together, from the first member
//     in precedence order, so that they describe one file;
//   - priority: the highest of the members (a work is as urgent as its most
//     urgent source);
//   - initial_curated_at the earliest, latest_curated_at the latest.
//
// A graph without any source record (keys only named by links that have
// since gone) marks its keys gone.
package merger

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
)

// VersionRule chooses the version of the works built from a match result.
type VersionRule int

const (
	// MatcherTime versions works with the time the matcher sent the result:
	// the rule of matcher-versioning.txt, and the only one to run.
	MatcherTime VersionRule = iota
	// MaxSourceTime versions works with the newest of their source records'
	// versions: the original approach, which gets stuck when records are
	// relinked out of order. It exists to demonstrate that in a test.
	MaxSourceTime
)

// Merger builds merged works.
type Merger struct {
	db         *pgxpool.Pool
	log        *slog.Logger
	precedence map[string]int
	rule       VersionRule
	rows       *prometheus.CounterVec
}

// Option configures a Merger.
type Option func(*Merger)

// WithVersionRule sets the version rule (MatcherTime by default).
func WithVersionRule(r VersionRule) Option { return func(m *Merger) { m.rule = r } }

// New returns a merger on db. precedence lists sources, most trusted first.
func New(db *pgxpool.Pool, precedence []string, reg prometheus.Registerer, log *slog.Logger, opts ...Option) *Merger {
	m := &Merger{db: db, log: log, precedence: map[string]int{}, rows: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archivist_curator_merged_rows_total",
		Help: "Work rows written by the merger, by kind and outcome (applied, replay, stale).",
	}, []string{"kind", "outcome"})}
	for i, s := range precedence {
		if s = strings.TrimSpace(s); s != "" {
			if _, dup := m.precedence[s]; !dup {
				m.precedence[s] = i
			}
		}
	}
	for _, o := range opts {
		o(m)
	}
	if reg != nil {
		reg.MustRegister(m.rows)
	}
	return m
}

// Row is a merger output row: what one key of a graph now is.
type Row = events.WorkUpserted

// Match is a match result to merge: a graph and the matcher's time.
type Match struct {
	SentAt time.Time
	Graph  *events.GraphMatched
}

// ApplyGroup builds the works of a group of match results whose graphs
// share no key and writes them, in one transaction: the records of every
// graph read with one query a kind, the rows written with one statement a
// kind, the explanations of the works applied now recorded with one more
// (a replay's were recorded with it). It returns each result's rows that
// are current (applied now, or already stored with this version: a
// redelivery re-publishes them), to publish.
func (m *Merger) ApplyGroup(ctx context.Context, group []Match) ([][]Row, error) {
	current := make([][]Row, len(group))
	err := catalog.InGroup(ctx, m.db, func(tx pgx.Tx) error {
		var history []Explanation
		for _, kind := range []catalog.Kind{catalog.Episode, catalog.Clip} {
			var idx []int
			var keys []string
			for i, g := range group {
				if catalog.Kind(g.Graph.Kind) == kind {
					idx = append(idx, i)
					keys = append(keys, g.Graph.Members...)
				}
			}
			if len(idx) == 0 {
				continue
			}
			all, err := catalog.GetMany(ctx, tx, kind, keys)
			if err != nil {
				return err
			}
			byKey := make(map[string]catalog.Record, len(all))
			for _, r := range all {
				byKey[r.Key()] = r
			}
			var rows []Row
			ordered := make([][]catalog.Record, len(group))
			for _, i := range idx {
				g := group[i].Graph
				recs := make([]catalog.Record, 0, len(g.Members))
				for _, k := range g.Members { // sorted: recs in key order
					if r, ok := byKey[k]; ok {
						recs = append(recs, r)
					}
				}
				version := group[i].SentAt
				if m.rule == MaxSourceTime {
					version = time.Time{}
					for _, r := range recs {
						if r.Version.After(version) {
							version = r.Version
						}
					}
				}
				ordered[i] = m.ordered(recs)
				rows = append(rows, m.build(g, recs, ordered[i], version)...)
			}
			outcomes, err := m.write(ctx, tx, kind, rows)
			if err != nil {
				return err
			}
			// Each result's rows are together, in its members' order.
			var applied []int
			n := 0
			for _, i := range idx {
				for range group[i].Graph.Members {
					switch outcomes[n] {
					case catalog.Applied, catalog.Replay:
						current[i] = append(current[i], rows[n])
					}
					if outcomes[n] == catalog.Applied && rows[n].State == events.WorkMerged {
						applied = append(applied, i)
					}
					n++
				}
			}
			if len(applied) == 0 {
				continue
			}
			// The works written now: their explanations.
			var linked []string
			for _, i := range applied {
				linked = append(linked, group[i].Graph.Members...)
			}
			links, refused, err := matcher.GraphLinks(ctx, tx, kind, linked)
			if err != nil {
				return err
			}
			graphOf := map[string]int{}
			for _, i := range applied {
				for _, k := range group[i].Graph.Members {
					graphOf[k] = i
				}
			}
			linksOf, refusedOf := map[int][]matcher.Link{}, map[int][]matcher.Refusal{}
			// A link is its graph's by its record (a merge by either end:
			// both are in one graph).
			of := func(from, to string) (int, bool) {
				i, ok := graphOf[from]
				if !ok {
					i, ok = graphOf[to]
				}
				return i, ok
			}
			for _, l := range links {
				if i, ok := of(l.From, l.To); ok {
					linksOf[i] = append(linksOf[i], l)
				}
			}
			for _, r := range refused {
				if i, ok := of(r.From, r.From); ok {
					refusedOf[i] = append(refusedOf[i], r)
				}
			}
			for _, i := range applied {
				for _, r := range current[i] {
					if r.State == events.WorkMerged {
						history = append(history, m.explain(r, ordered[i], linksOf[i], refusedOf[i]))
					}
				}
			}
		}
		return record(ctx, tx, history)
	})
	if err != nil {
		return nil, fmt.Errorf("merge %s: %w", groupName(group), err)
	}
	return current, nil
}

// groupName names a group of match results in an error.
func groupName(group []Match) string {
	g := group[0].Graph
	if len(group) == 1 {
		return g.Kind + " graph " + g.Members[0]
	}
	return fmt.Sprintf("%s graph %s and %d more", g.Kind, g.Members[0], len(group)-1)
}

// build applies the merge rule to a graph's records, recs in key order
// and ordered as the rule reads them.
func (m *Merger) build(g *events.GraphMatched, recs, ordered []catalog.Record, version time.Time) []Row {
	rows := make([]Row, 0, len(g.Members))
	if len(recs) == 0 {
		for _, k := range g.Members {
			rows = append(rows, Row{Kind: g.Kind, Key: k, Version: version, State: events.WorkGone})
		}
		return rows
	}
	head := recs[0].Key() // recs are in key order: the smallest key with a record
	s := choose(ordered)
	w := Row{Kind: g.Kind, Key: head, Version: version, State: events.WorkMerged, Members: g.Members,
		Title: s.title.Title, Media: events.Media{Key: s.media.MediaKey, SHA256: s.media.MediaSHA256}, DurationMS: s.media.DurationMS,
		Priority: s.priority.Priority, InitialCuratedAt: s.initial.InitialCuratedAt, LatestCuratedAt: s.latest.LatestCuratedAt}
	for _, k := range g.Members {
		if k == head {
			rows = append(rows, w)
		} else {
			rows = append(rows, Row{Kind: g.Kind, Key: k, Version: version, State: events.WorkRedirect, RedirectTo: head})
		}
	}
	return rows
}

// sources are the records a work's fields are taken from, by the merge
// rule (the package comment): build takes the values, an explanation names
// the records.
type sources struct {
	title, media, priority, initial, latest catalog.Record
}

// choose applies the merge rule to records in precedence order: the first
// non-empty title; media, checksum and duration from the first record; the
// highest priority, the earliest initial and the latest latest curation
// time, each from the first record in order that holds it.
func choose(ordered []catalog.Record) sources {
	first := ordered[0]
	s := sources{title: first, media: first, priority: first, initial: first, latest: first}
	titled := first.Title != ""
	for _, r := range ordered {
		if !titled && r.Title != "" {
			s.title, titled = r, true
		}
		if r.Priority > s.priority.Priority {
			s.priority = r
		}
		if r.InitialCuratedAt.Before(s.initial.InitialCuratedAt) {
			s.initial = r
		}
		if r.LatestCuratedAt.After(s.latest.LatestCuratedAt) {
			s.latest = r
		}
	}
	return s
}

// ordered is recs in the order the merge rule reads them: by source
// precedence (unlisted sources after, by name), then key.
func (m *Merger) ordered(recs []catalog.Record) []catalog.Record {
	ordered := slices.Clone(recs)
	slices.SortStableFunc(ordered, func(a, b catalog.Record) int {
		if pa, pb := m.rank(a.Source), m.rank(b.Source); pa != pb {
			return pa - pb
		}
		if a.Source != b.Source {
			return strings.Compare(a.Source, b.Source)
		}
		return strings.Compare(a.Key(), b.Key())
	})
	return ordered
}

// rank is a source's place in the precedence list; unlisted sources after.
func (m *Merger) rank(source string) int {
	if p, ok := m.precedence[source]; ok {
		return p
	}
	return len(m.precedence)
}

// write stores the rows in one conditional statement: each row replaces
// the stored row of its key only if that is older. It returns each row's
// outcome. The rows are written in key order, so two writers lock them in
// one order.
func (m *Merger) write(ctx context.Context, tx pgx.Tx, kind catalog.Kind, rows []Row) ([]catalog.Outcome, error) {
	n := len(rows)
	keys, states, redirects := make([]string, n), make([]string, n), make([]string, n)
	members := make([]string, n) // each a JSON array: a ragged text[][] cannot be sent
	titles, mediaKeys, shas := make([]string, n), make([]string, n), make([]string, n)
	durations, priorities := make([]int64, n), make([]int32, n)
	versions := make([]time.Time, n)
	initials, latests := make([]*time.Time, n), make([]*time.Time, n)
	for i, r := range rows {
		keys[i], states[i], redirects[i], versions[i] = r.Key, r.State, r.RedirectTo, r.Version
		members[i] = catalog.JSONArray(r.Members)
		titles[i], mediaKeys[i], shas[i] = r.Title, r.Media.Key, r.Media.SHA256
		durations[i], priorities[i] = r.DurationMS, r.Priority
		if r.State == events.WorkMerged {
			initials[i], latests[i] = &rows[i].InitialCuratedAt, &rows[i].LatestCuratedAt
		}
	}
	q := `WITH u AS (
	SELECT * FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
		$10::bigint[], $11::int[], $12::timestamptz[], $13::timestamptz[]) WITH ORDINALITY
		AS u(key, version, state, redirect_to, members, title, media_key, media_sha256, duration_ms, priority, initial, latest, n)
),
prior AS (SELECT w.key, w.version FROM curator.works w WHERE w.kind = $1 AND w.key = ANY($2)),
up AS (
	INSERT INTO curator.works AS w (kind, key, version, state, redirect_to, members, title, media_key, media_sha256,
		duration_ms, priority, initial_curated_at, latest_curated_at)
	SELECT $1, u.key, u.version, u.state, u.redirect_to, ARRAY(SELECT jsonb_array_elements_text(u.members::jsonb)), u.title,
		u.media_key, u.media_sha256, u.duration_ms, u.priority, u.initial, u.latest
	FROM u ORDER BY u.key
	ON CONFLICT (kind, key) DO UPDATE SET version = EXCLUDED.version, state = EXCLUDED.state,
		redirect_to = EXCLUDED.redirect_to, members = EXCLUDED.members, title = EXCLUDED.title,
		media_key = EXCLUDED.media_key, media_sha256 = EXCLUDED.media_sha256, duration_ms = EXCLUDED.duration_ms,
		priority = EXCLUDED.priority, initial_curated_at = EXCLUDED.initial_curated_at,
		latest_curated_at = EXCLUDED.latest_curated_at, updated_at = now()
	WHERE w.version < EXCLUDED.version
	RETURNING w.key
)
SELECT u.key, prior.version, up.key IS NOT NULL FROM u
	LEFT JOIN prior ON prior.key = u.key LEFT JOIN up ON up.key = u.key
ORDER BY u.n`
	res, err := tx.Query(ctx, q, string(kind), keys, versions, states, redirects, members, titles, mediaKeys, shas,
		durations, priorities, initials, latests)
	if err != nil {
		return nil, fmt.Errorf("write works: %w", err)
	}
	outcomes := make([]catalog.Outcome, 0, n)
	var key string
	var prior *time.Time
	var applied bool
	if _, err := pgx.ForEachRow(res, []any{&key, &prior, &applied}, func() error {
		version := rows[len(outcomes)].Version
		out := catalog.Applied
		if !applied {
			out = catalog.Stale
			if prior != nil && prior.Equal(version) {
				out = catalog.Replay
			}
		}
		m.rows.WithLabelValues(string(kind), string(out)).Inc()
		if out == catalog.Stale {
			m.log.InfoContext(ctx, "stale work skipped: a newer match of this key is stored", "kind", kind, "key", key,
				"version", version, "stored_version", prior)
		}
		outcomes = append(outcomes, out)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("write works: %w", err)
	}
	return outcomes, nil
}
