// Package work is the archive's durable work as an operator sees it, the
// same in every pipeline: an item (an ingest job or batch, a research
// episode, an archive file being indexed, an audit task, a parked mail) has
// a state, attempts, a next attempt, the failure model's reason, a holder,
// when it last moved, its depositor and collection and the keys it is
// known by; an operator finds items by any of these and acts on one item or
// on every item a filter matches with the same verbs everywhere (retry,
// release, hold, skip, park, requeue, replay, delete, resend).
//
// Each pipeline keeps its own state table and steps (the specs' tables stay
// where a reader finds them) and says, in a Source, how its rows read as
// items and what each verb does to them. This package does the rest once:
// the filter and its validation, paging in one order across pipelines, the
// dry run that counts what an action would move, the action confirmed by
// that count (refused when it moved), the action log, and the HTTP routes
// (Handler) and their client (Client).
//
// Why not riverqueue/river: see docs/work.md. In short, the designs'
// state machines (ingest's fourteen states with admin moves, research's
// leases of an episode and its clips, the indexer's bad-reputation rule,
// the auditor's eleven outcomes over JetStream work subjects) are not one
// job row's available/running/retryable/completed life; river would be a
// fifth queue beside them, not the one under them. What they share is the
// operator's view and verbs, which is what this package owns.
package work

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verb is an operator's action on work.
type Verb string

// The verbs. A pipeline takes the ones that mean something for it (its
// Source's Verbs); the others are refused with what it takes.
const (
	// Retry tries failed or parked work again from where it failed.
	Retry Verb = "retry"
	// Release lets held or parked work go on.
	Release Verb = "release"
	// Hold stops work that waits from being taken until it is released.
	Hold Verb = "hold"
	// Skip gives up on work without deleting it (an episode no one will
	// research, a file no one will index).
	Skip Verb = "skip"
	// Park sets work aside until an operator releases it.
	Park Verb = "park"
	// Requeue starts work again from its last successful step.
	Requeue Verb = "requeue"
	// Replay sends a dead letter's message again.
	Replay Verb = "replay"
	// Delete removes work (its history stays).
	Delete Verb = "delete"
	// Resend sends a parked mail again.
	Resend Verb = "resend"
)

// Verbs are every verb, in the order help lists them.
var Verbs = []Verb{Retry, Release, Hold, Skip, Park, Requeue, Replay, Delete, Resend}

// ParseVerb reads a verb's name.
func ParseVerb(s string) (Verb, error) {
	if slices.Contains(Verbs, Verb(s)) {
		return Verb(s), nil
	}
	names := make([]string, len(Verbs))
	for i, v := range Verbs {
		names[i] = string(v)
	}
	return "", &InvalidError{Field: "verb", Msg: fmt.Sprintf("%q is none of %s", s, strings.Join(names, ", "))}
}

// Item is one unit of durable work.
type Item struct {
	// Pipeline is ingest, research, index, audit or mail.
	Pipeline string `json:"pipeline"`
	// Kind is what the item is in its pipeline: job, batch, episode, file,
	// request, repair, mail.
	Kind string `json:"kind"`
	// ID is the item's id or key in its pipeline.
	ID string `json:"id"`
	// State is the pipeline's own word for where the item is.
	State string `json:"state"`
	// Attempts is how many attempts at its current step failed (or, for a
	// requeued ingest job, how often it was requeued).
	Attempts int `json:"attempts"`
	// NextAttemptAt is when it is tried again, if it waits to be.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Reason is the failure model's verdict and reason, or the error, of
	// its last failed attempt.
	Reason string `json:"reason,omitempty"`
	// Holder is who holds it now (a researcher's lease), if anyone.
	Holder string `json:"holder,omitempty"`
	// MovedAt is when it entered its state.
	MovedAt time.Time `json:"moved_at"`
	// CreatedAt is when it was made.
	CreatedAt time.Time `json:"created_at"`
	// Submitter is the depositor whose work it is, if a depositor's.
	Submitter string `json:"submitter,omitempty"`
	// Collection is its collection (an ingest profile), if it has one.
	Collection string `json:"collection,omitempty"`
	// Keys are the other names it is known by: ARK, local id, file name
	// or storage key, URL, episode or clip.
	Keys []string `json:"keys,omitempty"`
	// Verbs are the verbs that would move it now.
	Verbs []Verb `json:"verbs,omitempty"`
}

// Ref is the item's reference across pipelines: pipeline/kind/id.
func (it Item) Ref() string { return it.Pipeline + "/" + it.Kind + "/" + it.ID }

// Filter says which items: every field set must match. The zero Filter
// matches every item.
type Filter struct {
	// Pipeline is one pipeline's name.
	Pipeline string `json:"pipeline,omitempty"`
	// Kind is one kind of item (job, batch, episode...).
	Kind string `json:"kind,omitempty"`
	// ID is one item's id (with Pipeline and Kind, or an id no other kind
	// shares).
	ID string `json:"id,omitempty"`
	// States are the states an item may be in (any of them).
	States []string `json:"states,omitempty"`
	// Collection is an ingest collection (profile).
	Collection string `json:"collection,omitempty"`
	// Submitter is a depositor.
	Submitter string `json:"submitter,omitempty"`
	// OlderThan keeps items that entered their state at least this long
	// ago.
	OlderThan time.Duration `json:"older_than,omitempty"`
	// Query matches an id, a key (ARK, local id, file name, URL, episode,
	// clip) exactly, or words of the error.
	Query string `json:"query,omitempty"`
}

// Bounds of a filter's fields: a filter is a request's, and a request is
// bounded.
const (
	maxField  = 1024
	maxStates = 16
)

// InvalidError is a filter or request that cannot be served: a 400 naming
// the field.
type InvalidError struct {
	Field, Msg string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks f's bounds and names.
func (f Filter) Validate() error {
	for name, v := range map[string]string{"pipeline": f.Pipeline, "kind": f.Kind, "id": f.ID, "collection": f.Collection, "submitter": f.Submitter, "query": f.Query} {
		if len(v) > maxField {
			return &InvalidError{Field: name, Msg: fmt.Sprintf("%d bytes, at most %d", len(v), maxField)}
		}
		if strings.ContainsRune(v, 0) {
			return &InvalidError{Field: name, Msg: "holds a NUL byte"}
		}
	}
	if len(f.States) > maxStates {
		return &InvalidError{Field: "state", Msg: fmt.Sprintf("%d states, at most %d", len(f.States), maxStates)}
	}
	for _, s := range f.States {
		if s == "" || len(s) > 64 {
			return &InvalidError{Field: "state", Msg: fmt.Sprintf("%q is no state", s)}
		}
	}
	if f.OlderThan < 0 {
		return &InvalidError{Field: "older_than", Msg: "negative"}
	}
	return nil
}

// Matches reports whether the filter's pipeline and kind admit source s.
func (f Filter) admits(s Source) bool {
	return (f.Pipeline == "" || f.Pipeline == s.Pipeline()) && (f.Kind == "" || f.Kind == s.Kind())
}

// Values is f as URL query parameters (ParseFilter reads them back).
func (f Filter) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("pipeline", f.Pipeline)
	set("kind", f.Kind)
	set("id", f.ID)
	for _, s := range f.States {
		v.Add("state", s)
	}
	set("collection", f.Collection)
	set("submitter", f.Submitter)
	if f.OlderThan > 0 {
		v.Set("older_than", f.OlderThan.String())
	}
	set("query", f.Query)
	return v
}

// ParseFilter reads a filter from URL query parameters: pipeline, kind,
// id, state (repeated or comma-separated), collection, submitter,
// older_than (a Go duration, or a number of days as "7d"), query.
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{Pipeline: q.Get("pipeline"), Kind: q.Get("kind"), ID: q.Get("id"),
		Collection: q.Get("collection"), Submitter: q.Get("submitter"), Query: strings.TrimSpace(q.Get("query"))}
	for _, s := range q["state"] {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				f.States = append(f.States, p)
			}
		}
	}
	if s := q.Get("older_than"); s != "" {
		d, err := ParseAge(s)
		if err != nil {
			return f, &InvalidError{Field: "older_than", Msg: err.Error()}
		}
		f.OlderThan = d
	}
	return f, f.Validate()
}

// ParseAge reads an age: a Go duration ("90m", "36h") or whole days ("7d").
func ParseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not an age (90m, 36h, 7d)", s)
	}
	return d, nil
}
