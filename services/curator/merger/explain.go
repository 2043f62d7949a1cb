package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
)

// Explanation is why a work is what it is: each field with the record,
// version and rule that supplied it, the members in the order the rule
// reads them, the same-as links that formed the graph and those refused.
// The merger records one with every work it writes (curator.work_history),
// so a work explains itself at any time since.
type Explanation struct {
	Kind string `json:"kind"`
	// Key is the work's key: the smallest key of its graph with a record.
	Key string `json:"key"`
	// Version is the matcher's time of the graph the work was built from.
	Version time.Time `json:"version"`
	// Precedence is the source precedence the merger was configured with,
	// most trusted first (unlisted sources after, by name).
	Precedence []string `json:"precedence"`
	// Members are the graph's records, in the order the rule reads them.
	Members []Member `json:"members"`
	// Fields are the work's fields, each with where it came from.
	Fields []Field `json:"fields"`
	// Links are the same-as links the matcher stored among the graph's
	// records; Refused those of its records it refused, and why.
	Links   []matcher.Link    `json:"links"`
	Refused []matcher.Refusal `json:"refused"`
}

// Member is one of a work's records, as the merge read it.
type Member struct {
	Key     string    `json:"key"`
	Source  string    `json:"source"`
	Version time.Time `json:"version"`
	EventID string    `json:"event_id"`
}

// Field is one field of a work: its value, the record (and version) that
// supplied it, and the rule that chose that record.
type Field struct {
	Name          string    `json:"name"`
	Value         string    `json:"value"`
	Record        string    `json:"record"`
	RecordVersion time.Time `json:"record_version"`
	Rule          string    `json:"rule"`
}

// The merge rule, field by field, as an explanation states it.
const (
	RuleTitle    = "the first non-empty title in source precedence"
	RuleMedia    = "the first record in source precedence: media, checksum and duration come together, from one file"
	RulePriority = "the highest of the records' priorities"
	RuleInitial  = "the earliest of the records' initial curation times"
	RuleLatest   = "the latest of the records' latest curation times"
)

// explain is the explanation of the work w built from the records ordered
// (in precedence order), with the graph's links and refusals.
func (m *Merger) explain(w Row, ordered []catalog.Record, links []matcher.Link, refused []matcher.Refusal) Explanation {
	e := Explanation{Kind: w.Kind, Key: w.Key, Version: w.Version, Precedence: m.order(), Links: links, Refused: refused}
	for _, r := range ordered {
		e.Members = append(e.Members, Member{Key: r.Key(), Source: r.Source, Version: r.Version.UTC(), EventID: r.EventID})
	}
	from := func(name, value string, r catalog.Record, rule string) {
		e.Fields = append(e.Fields, Field{Name: name, Value: value, Record: r.Key(), RecordVersion: r.Version.UTC(), Rule: rule})
	}
	c := choose(ordered)
	from("title", w.Title, c.title, RuleTitle)
	from("media_key", w.Media.Key, c.media, RuleMedia)
	from("media_sha256", w.Media.SHA256, c.media, RuleMedia)
	from("duration_ms", strconv.FormatInt(w.DurationMS, 10), c.media, RuleMedia)
	from("priority", strconv.Itoa(int(w.Priority)), c.priority, RulePriority)
	from("initial_curated_at", w.InitialCuratedAt.UTC().Format(time.RFC3339Nano), c.initial, RuleInitial)
	from("latest_curated_at", w.LatestCuratedAt.UTC().Format(time.RFC3339Nano), c.latest, RuleLatest)
	return e
}

// order is the configured precedence, most trusted first.
func (m *Merger) order() []string {
	out := make([]string, 0, len(m.precedence))
	for s := range m.precedence {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b string) int { return m.precedence[a] - m.precedence[b] })
	return out
}

// record stores the explanations of works written at their versions, in
// one statement (once: a replay keeps the first).
func record(ctx context.Context, tx pgx.Tx, es []Explanation) error {
	if len(es) == 0 {
		return nil
	}
	n := len(es)
	kinds, keys, members, docs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions := make([]time.Time, n)
	for i, e := range es {
		ks := make([]string, len(e.Members))
		for j, mb := range e.Members {
			ks[j] = mb.Key
		}
		doc, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("the explanation of %s: %w", e.Key, err)
		}
		kinds[i], keys[i], versions[i], members[i], docs[i] = e.Kind, e.Key, e.Version, catalog.JSONArray(ks), string(doc)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO curator.work_history (kind, key, version, members, explanation)
		SELECT k, key, v, ARRAY(SELECT jsonb_array_elements_text(m::jsonb)), e::jsonb
		FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[]) AS u(k, key, v, m, e)
		ON CONFLICT DO NOTHING`, kinds, keys, versions, members, docs); err != nil {
		return fmt.Errorf("record the explanations of %d works: %w", n, err)
	}
	return nil
}

// ErrNoHistory is returned by Explain for a key no recorded work had
// listed by the time asked.
var ErrNoHistory = errors.New("no explanation recorded")

// Explain is the explanation of the work key belonged to at the time at
// (the zero time: now), as the merger recorded it when it wrote that work.
func Explain(ctx context.Context, q catalog.Querier, kind catalog.Kind, key string, at time.Time) (Explanation, error) {
	if at.IsZero() {
		at = time.Now().Add(events.MaxClockSkew)
	}
	rows, err := q.Query(ctx, `SELECT explanation FROM curator.work_history
		WHERE kind = $1 AND members @> ARRAY[$2::text] AND written_at <= $3 ORDER BY written_at DESC, version DESC LIMIT 1`,
		string(kind), key, at)
	if err != nil {
		return Explanation{}, fmt.Errorf("explain %s %s: %w", kind, key, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[Explanation])
	if errors.Is(err, pgx.ErrNoRows) {
		return Explanation{}, fmt.Errorf("%s %s at %s: %w", kind, key, at.UTC().Format(time.RFC3339), ErrNoHistory)
	}
	if err != nil {
		return Explanation{}, fmt.Errorf("explain %s %s: %w", kind, key, err)
	}
	return e, nil
}

// Change is one difference between two explanations of a key's work.
type Change struct {
	// What changed: a field's name, "work" (the key's work moved),
	// "members", "link" or "refused".
	What string `json:"what"`
	// Before and After are the values (a field's with its record, a
	// member's or a link's key; "" where there was none).
	Before string `json:"before"`
	After  string `json:"after"`
}

// Changes are the differences between two explanations of the same key's
// work, from before to after.
func Changes(before, after Explanation) []Change {
	var out []Change
	if before.Key != after.Key {
		out = append(out, Change{What: "work", Before: before.Key, After: after.Key})
	}
	fields := map[string]Field{}
	for _, f := range before.Fields {
		fields[f.Name] = f
	}
	for _, f := range after.Fields {
		if b := fields[f.Name]; b.Value != f.Value || b.Record != f.Record {
			out = append(out, Change{What: f.Name, Before: b.Value + " (" + b.Record + ")", After: f.Value + " (" + f.Record + ")"})
		}
	}
	set := func(what string, b, a []string) {
		for _, k := range b {
			if !slices.Contains(a, k) {
				out = append(out, Change{What: what, Before: k})
			}
		}
		for _, k := range a {
			if !slices.Contains(b, k) {
				out = append(out, Change{What: what, After: k})
			}
		}
	}
	keys := func(ms []Member) []string {
		var ks []string
		for _, m := range ms {
			ks = append(ks, m.Key)
		}
		return ks
	}
	links := func(ls []matcher.Link) []string {
		var ks []string
		for _, l := range ls {
			ks = append(ks, l.From+" -> "+l.To)
		}
		return ks
	}
	refusals := func(rs []matcher.Refusal) []string {
		var ks []string
		for _, r := range rs {
			ks = append(ks, r.From+" -> "+r.To+": "+r.Reason)
		}
		return ks
	}
	set("members", keys(before.Members), keys(after.Members))
	set("link", links(before.Links), links(after.Links))
	set("refused", refusals(before.Refused), refusals(after.Refused))
	return out
}

// PruneHistory deletes up to limit explanations written before before,
// each of a work with a newer one: a work's newest explanation is kept
// whatever its age, so every work explains itself now, and what it was
// at an earlier time can be asked within the retention. It returns how
// many it deleted; a caller prunes a page at a time until none is left.
func PruneHistory(ctx context.Context, q catalog.Querier, before time.Time, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM curator.work_history h USING (
			SELECT o.kind, o.key, o.version FROM curator.work_history o
			WHERE o.written_at < $1 AND EXISTS (SELECT 1 FROM curator.work_history n
				WHERE n.kind = o.kind AND n.key = o.key AND n.version > o.version)
			ORDER BY o.written_at LIMIT $2) d
		WHERE h.kind = d.kind AND h.key = d.key AND h.version = d.version`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("prune explanations written before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}
