// Package completeness checks, continuously, the promise that curation
// loses nothing: every source record belongs to exactly one work, and every
// work is at least as new as the graph it was built from. It walks the
// catalogue a page at a time (a pass over every record and every work, then
// the next pass), from the records' side (each record's work row resolves
// to a work that lists it, no older than the record's graph) and from the
// works' side (each member a work lists resolves back to that work, so no
// record is listed by two). A record that breaks it is matched again and
// its results published (the merger then rewrites its works): healed, and
// counted. What is still in flight is left alone: a record or work changed
// within the grace period is not judged yet.
//
// A pass ends with per-source counts: records, records placed in a work,
// refused links. A record found broken in two passes in a row, healed in
// between, is one the healing does not converge on: counted apart, for an
// alert (docs/RUNBOOK.md).
package completeness

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/services/curator/catalog"
)

// Rematch matches a record's graph again and publishes the results.
type Rematch func(ctx context.Context, kind catalog.Kind, key string) error

// Checker walks the catalogue and heals what breaks the promise. One runs
// at a time (the curator's leader); a new one starts a pass afresh.
type Checker struct {
	db      *pgxpool.Pool
	rematch Rematch
	log     *slog.Logger
	page    int
	grace   time.Duration
	every   time.Duration
	passes  map[catalog.Kind]*pass
	m       metrics
}

// Option configures a Checker.
type Option func(*Checker)

// WithPage sets how many records and how many works a step reads of each
// kind (default 5,000).
func WithPage(n int) Option { return func(c *Checker) { c.page = max(n, 1) } }

// WithEvery sets how often a pass starts at most (default 10 minutes): a
// catalogue checked faster waits for the next, so an idle curator does not
// read its whole catalogue again and again.
func WithEvery(d time.Duration) Option { return func(c *Checker) { c.every = d } }

// WithGrace sets how long a record or work may be in flight (changed, its
// merge not yet done) before it is judged (default 10 minutes).
func WithGrace(d time.Duration) Option { return func(c *Checker) { c.grace = d } }

// New returns a checker of the catalogue in db that heals with rematch and
// registers its metrics with reg (nil: none).
func New(db *pgxpool.Pool, rematch Rematch, reg prometheus.Registerer, log *slog.Logger, opts ...Option) *Checker {
	c := &Checker{db: db, rematch: rematch, log: log, page: 5000, grace: 10 * time.Minute, every: 10 * time.Minute,
		passes: map[catalog.Kind]*pass{}, m: newMetrics(reg)}
	for _, o := range opts {
		o(c)
	}
	for _, k := range []catalog.Kind{catalog.Episode, catalog.Clip} {
		c.passes[k] = newPass(nil)
	}
	return c
}

// Violation is a record found breaking the promise, and how.
type Violation struct {
	Kind  catalog.Kind
	Key   string
	Check string
}

// The checks a violation names.
const (
	// Unmatched: the record has no graph.
	Unmatched = "unmatched"
	// NoWork: the record's key has no work row.
	NoWork = "no-work"
	// Stale: the record's work row is older than its graph.
	Stale = "stale"
	// Gone: the record's work row says its graph has no record.
	Gone = "gone"
	// NotListed: the work the record's row names does not list it.
	NotListed = "not-listed"
	// ListedElsewhere: a work lists a record whose row names another
	// work (a record in two works).
	ListedElsewhere = "listed-elsewhere"
)

// Checks are every check a violation names.
var Checks = []string{Unmatched, NoWork, Stale, Gone, NotListed, ListedElsewhere}

// Counts are one source's counts at the end of a pass.
type Counts struct {
	// Records are the source's records; Placed those found in exactly one
	// current work (the others are in flight or were broken, and healed).
	Records int `json:"records"`
	Placed  int `json:"placed"`
	// Refused are the same-as links of the source's records the matcher
	// refused.
	Refused int `json:"refused"`
}

// Pass is what a finished pass found.
type Pass struct {
	Kind       catalog.Kind `json:"-"`
	EndedAt    time.Time    `json:"ended_at"`
	Violations int          `json:"violations"`
	// Unhealed are the violations of records healed in the pass before:
	// the healing does not converge on them.
	Unhealed int               `json:"unhealed"`
	Sources  map[string]Counts `json:"sources"`
}

// LastPasses are the last finished pass of each kind, as the leader
// recorded it (any replica may read them: the curation status does).
func LastPasses(ctx context.Context, q catalog.Querier) (map[catalog.Kind]Pass, error) {
	rows, err := q.Query(ctx, `SELECT kind, ended_at, violations, unhealed, sources FROM curator.invariant_passes`)
	if err != nil {
		return nil, fmt.Errorf("last invariant passes: %w", err)
	}
	out := map[catalog.Kind]Pass{}
	var p Pass
	var kind string
	if _, err := pgx.ForEachRow(rows, []any{&kind, &p.EndedAt, &p.Violations, &p.Unhealed, &p.Sources}, func() error {
		p.Kind = catalog.Kind(kind)
		out[p.Kind] = p
		p = Pass{}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("last invariant passes: %w", err)
	}
	return out, nil
}

// Step is what one step did.
type Step struct {
	Checked, Healed int
	Violations      []Violation
	// Passes are the passes this step finished.
	Passes []Pass
}

// pass is a pass in progress over one kind.
type pass struct {
	started                  time.Time
	recordsAfter, worksAfter string
	recordsDone, worksDone   bool
	violations               int
	unhealed                 int
	sources                  map[string]*Counts
	healed                   map[string]bool // this pass's
	healedBefore             map[string]bool // the pass before's
}

// maxTracked bounds the keys a pass remembers as healed (for the
// convergence count): beyond it, violations are still healed and counted.
const maxTracked = 100_000

func newPass(healedBefore map[string]bool) *pass {
	return &pass{started: time.Now(), sources: map[string]*Counts{}, healed: map[string]bool{}, healedBefore: healedBefore}
}

func (p *pass) source(s string) *Counts {
	c := p.sources[s]
	if c == nil {
		c = &Counts{}
		p.sources[s] = c
	}
	return c
}

// Step checks the next page of records and works of each kind, heals the
// violations found and, where a pass ends, reports it and starts the next.
func (c *Checker) Step(ctx context.Context) (Step, error) {
	var st Step
	for _, kind := range []catalog.Kind{catalog.Episode, catalog.Clip} {
		p := c.passes[kind]
		if p.recordsAfter == "" && p.worksAfter == "" && time.Since(p.started) < 0 {
			continue // the next pass is not due yet
		}
		var found []Violation
		if !p.recordsDone {
			v, n, err := c.records(ctx, kind, p)
			if err != nil {
				return st, err
			}
			found, st.Checked = append(found, v...), st.Checked+n
		}
		if !p.worksDone {
			v, n, err := c.works(ctx, kind, p)
			if err != nil {
				return st, err
			}
			found, st.Checked = append(found, v...), st.Checked+n
		}
		healed := map[string]bool{}
		for _, v := range found {
			c.m.violations.WithLabelValues(string(kind), v.Check).Inc()
			p.violations++
			if p.healedBefore[v.Key] {
				p.unhealed++
			}
			st.Violations = append(st.Violations, v)
			if healed[v.Key] {
				continue
			}
			healed[v.Key] = true
			c.log.WarnContext(ctx, "curation invariant broken: matching the record again", "kind", kind, "key", v.Key, "check", v.Check)
			if err := c.rematch(ctx, kind, v.Key); err != nil {
				return st, fmt.Errorf("heal %s %s: %w", kind, v.Key, err)
			}
			c.m.healed.WithLabelValues(string(kind)).Inc()
			st.Healed++
			if len(p.healed) < maxTracked {
				p.healed[v.Key] = true
			}
		}
		if p.recordsDone && p.worksDone {
			done, err := c.finish(ctx, kind, p)
			if err != nil {
				return st, err
			}
			st.Passes = append(st.Passes, done)
			next := newPass(p.healed)
			next.started = p.started.Add(c.every) // due then, or now if the pass took longer
			c.passes[kind] = next
		}
	}
	return st, nil
}

// judged is the SQL condition that a row changed at col is past the grace
// period ($2 seconds).
const judged = `< now() - make_interval(secs => $2)`

// records checks the next page of kind's records from their side.
func (c *Checker) records(ctx context.Context, kind catalog.Kind, p *pass) ([]Violation, int, error) {
	table := "curator.episodes"
	if kind == catalog.Clip {
		table = "curator.clips"
	}
	rows, err := c.db.Query(ctx, `SELECT r.key, r.source, r.updated_at `+judged+`,
			n.matched_at, n.matched_at IS NULL OR n.matched_at `+judged+`,
			w.state, w.version, w.updated_at IS NULL OR w.updated_at `+judged+`, coalesce(w.state = 'work' AND r.key = ANY(w.members), false),
			t.state, coalesce(r.key = ANY(t.members), false)
		FROM (SELECT key, source, updated_at FROM `+table+` WHERE key > $3 ORDER BY key LIMIT $4) r
		LEFT JOIN curator.match_nodes n ON n.kind = $1 AND n.key = r.key
		LEFT JOIN curator.works w ON w.kind = $1 AND w.key = r.key
		LEFT JOIN curator.works t ON w.state = 'redirect' AND t.kind = $1 AND t.key = w.redirect_to
		ORDER BY r.key`, string(kind), c.grace.Seconds(), p.recordsAfter, c.page)
	if err != nil {
		return nil, 0, fmt.Errorf("check %s records: %w", kind, err)
	}
	var out []Violation
	n := 0
	var key, source string
	var recordOld, nodeOld, workOld, own, inTarget bool
	var matched, version *time.Time
	var state, target *string
	_, err = pgx.ForEachRow(rows, []any{&key, &source, &recordOld, &matched, &nodeOld, &state, &version, &workOld, &own, &target, &inTarget}, func() error {
		n++
		p.recordsAfter = key
		counts := p.source(source)
		counts.Records++
		check := ""
		switch {
		case matched == nil:
			check = Unmatched
		case state == nil:
			check = NoWork
		case version.Before(*matched):
			check = Stale
		case *state == "gone":
			check = Gone
		case *state == "work" && !own, *state == "redirect" && (target == nil || *target != "work" || !inTarget):
			check = NotListed
		}
		if check == "" {
			counts.Placed++
			return nil
		}
		// In flight (the record, its graph or its work changed within
		// the grace period): judged in a later pass.
		if recordOld && nodeOld && workOld {
			out = append(out, Violation{Kind: kind, Key: key, Check: check})
		}
		return nil
	})
	if err != nil {
		return nil, n, fmt.Errorf("check %s records: %w", kind, err)
	}
	if n < c.page {
		p.recordsDone = true
	}
	return out, n, nil
}

// works checks the next page of kind's works from their side: each member
// a work lists has a row naming that work.
func (c *Checker) works(ctx context.Context, kind catalog.Kind, p *pass) ([]Violation, int, error) {
	rows, err := c.db.Query(ctx, `SELECT w.key, w.updated_at `+judged+`, m.member,
			x.state IS NOT NULL AND (x.state = 'work' AND x.key = w.key OR x.state = 'redirect' AND x.redirect_to = w.key),
			x.updated_at IS NULL OR x.updated_at `+judged+`
		FROM (SELECT key, members, updated_at FROM curator.works
			WHERE kind = $1 AND state = 'work' AND key > $3 ORDER BY key LIMIT $4) w
		CROSS JOIN LATERAL unnest(w.members) AS m(member)
		LEFT JOIN curator.works x ON x.kind = $1 AND x.key = m.member
		ORDER BY w.key, m.member`, string(kind), c.grace.Seconds(), p.worksAfter, c.page)
	if err != nil {
		return nil, 0, fmt.Errorf("check %s works: %w", kind, err)
	}
	var out []Violation
	works := 0
	var key, member string
	var workOld, resolves, memberOld bool
	_, err = pgx.ForEachRow(rows, []any{&key, &workOld, &member, &resolves, &memberOld}, func() error {
		if key != p.worksAfter {
			works++
			p.worksAfter = key
		}
		if !resolves && workOld && memberOld {
			// The work lists a record that belongs elsewhere: its graph
			// (the work's key) is matched again, and the member's.
			out = append(out, Violation{Kind: kind, Key: key, Check: ListedElsewhere},
				Violation{Kind: kind, Key: member, Check: ListedElsewhere})
		}
		return nil
	})
	if err != nil {
		return nil, works, fmt.Errorf("check %s works: %w", kind, err)
	}
	// A page is whole works: one with no member reads no row, so the page
	// ends when fewer works than asked came back.
	if works < c.page {
		p.worksDone = true
	}
	return out, works, nil
}

// finish ends a pass: the refused links by source, then the pass's counts
// as metrics.
func (c *Checker) finish(ctx context.Context, kind catalog.Kind, p *pass) (Pass, error) {
	rows, err := c.db.Query(ctx, `SELECT split_part(from_key, ':', 1), count(*) FROM curator.match_refused
		WHERE kind = $1 GROUP BY 1`, string(kind))
	if err != nil {
		return Pass{}, fmt.Errorf("refused %s links: %w", kind, err)
	}
	var source string
	var refused int
	if _, err := pgx.ForEachRow(rows, []any{&source, &refused}, func() error {
		p.source(source).Refused = refused
		return nil
	}); err != nil {
		return Pass{}, fmt.Errorf("refused %s links: %w", kind, err)
	}
	done := Pass{Kind: kind, EndedAt: time.Now().UTC().Truncate(time.Microsecond), Violations: p.violations, Unhealed: p.unhealed, Sources: map[string]Counts{}}
	c.m.records.DeletePartialMatch(prometheus.Labels{"kind": string(kind)})
	c.m.placed.DeletePartialMatch(prometheus.Labels{"kind": string(kind)})
	c.m.refused.DeletePartialMatch(prometheus.Labels{"kind": string(kind)})
	for s, n := range p.sources {
		done.Sources[s] = *n
		c.m.records.WithLabelValues(string(kind), s).Set(float64(n.Records))
		c.m.placed.WithLabelValues(string(kind), s).Set(float64(n.Placed))
		c.m.refused.WithLabelValues(string(kind), s).Set(float64(n.Refused))
	}
	if _, err := c.db.Exec(ctx, `INSERT INTO curator.invariant_passes (kind, ended_at, violations, unhealed, sources)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind) DO UPDATE SET ended_at = EXCLUDED.ended_at,
		violations = EXCLUDED.violations, unhealed = EXCLUDED.unhealed, sources = EXCLUDED.sources`,
		string(kind), done.EndedAt, done.Violations, done.Unhealed, done.Sources); err != nil {
		return Pass{}, fmt.Errorf("record the %s pass: %w", kind, err)
	}
	c.m.passViolations.WithLabelValues(string(kind)).Set(float64(p.violations))
	c.m.unhealed.WithLabelValues(string(kind)).Set(float64(p.unhealed))
	c.m.passEnd.WithLabelValues(string(kind)).SetToCurrentTime()
	level := slog.LevelDebug
	if p.violations > 0 {
		level = slog.LevelWarn
	}
	c.log.Log(ctx, level, "curation invariant: a pass ended", "kind", kind, "violations", p.violations, "unhealed", p.unhealed, "sources", len(p.sources))
	return done, nil
}
