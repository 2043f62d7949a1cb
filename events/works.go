package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// Event types of the matcher and merger stages.
const (
	TypeGraphMatched = "match.graph.matched"
	TypeWorkUpserted = "works.work.upserted"
)

// Record kinds that are matched and merged.
const (
	KindEpisode = "episode"
	KindClip    = "clip"
)

// GraphMatched is the matcher's result: the records of one kind that the
// latest source state links together (a connected component of same-as
// links), and so make one work. The envelope's SentAt is the time the
// matcher sent it, taken while it held the graph: the version of every work
// the merger builds from it.
type GraphMatched struct {
	// Kind is "episode" or "clip".
	Kind string `msgpack:"kind" json:"kind"`
	// Members are the records' keys ("source:id"), sorted.
	Members []string `msgpack:"members" json:"members"`
}

// EventType implements Event.
func (GraphMatched) EventType() string { return TypeGraphMatched }

// EventSchemaVersion implements Event.
func (GraphMatched) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (g *GraphMatched) Validate() error {
	if err := validateKind(g.Kind); err != nil {
		return err
	}
	if len(g.Members) == 0 {
		return &FieldError{Field: "members", Msg: "is empty"}
	}
	if len(g.Members) > MaxGraphMembers {
		return &FieldError{Field: "members", Msg: fmt.Sprintf("has %d records, at most %d allowed", len(g.Members), MaxGraphMembers)}
	}
	if !slices.IsSorted(g.Members) {
		return &FieldError{Field: "members", Msg: "must be sorted"}
	}
	return nil
}

// Work states.
const (
	// WorkMerged is a work built from one or more source records.
	WorkMerged = "work"
	// WorkRedirect is a record merged into another record's work.
	WorkRedirect = "redirect"
	// WorkGone is a key whose graph holds no source record any more.
	WorkGone = "gone"
)

// WorkUpserted is the merger's output for one record key: the merged work
// it heads, a redirect to the work it was merged into, or gone. These are
// what the research pipeline works on.
type WorkUpserted struct {
	// Kind is "episode" or "clip".
	Kind string `msgpack:"kind" json:"kind"`
	// Key is the record key this row is for; a merged work's id.
	Key string `msgpack:"key" json:"key"`
	// Version is the matcher's time for the graph: newer wins downstream.
	Version time.Time `msgpack:"version" json:"version"`
	// State is "work", "redirect" or "gone".
	State string `msgpack:"state" json:"state"`
	// RedirectTo is the work a redirect points to.
	RedirectTo string `msgpack:"redirect_to,omitempty" json:"redirect_to,omitempty"`
	// Members are the keys merged into a work, sorted.
	Members []string `msgpack:"members,omitempty" json:"members,omitempty"`
	// Title, Media, DurationMS, Priority and the curation dates of a work,
	// chosen from its members by the merge rule.
	Title            string    `msgpack:"title,omitempty" json:"title,omitempty"`
	Media            Media     `msgpack:"media" json:"media"`
	DurationMS       int64     `msgpack:"duration_ms" json:"duration_ms"`
	Priority         int32     `msgpack:"priority" json:"priority"`
	InitialCuratedAt time.Time `msgpack:"initial_curated_at" json:"initial_curated_at"`
	LatestCuratedAt  time.Time `msgpack:"latest_curated_at" json:"latest_curated_at"`
}

// EventType implements Event.
func (WorkUpserted) EventType() string { return TypeWorkUpserted }

// EventSchemaVersion implements Event.
func (WorkUpserted) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (w *WorkUpserted) Validate() error {
	if err := validateKind(w.Kind); err != nil {
		return err
	}
	if w.Key == "" {
		return &FieldError{Field: "key", Msg: "is required"}
	}
	if w.Version.IsZero() {
		return &FieldError{Field: "version", Msg: "is required"}
	}
	switch w.State {
	case WorkMerged, WorkGone:
	case WorkRedirect:
		if w.RedirectTo == "" {
			return &FieldError{Field: "redirect_to", Msg: "is required for a redirect"}
		}
	default:
		return &FieldError{Field: "state", Msg: fmt.Sprintf("%q is not work, redirect or gone", w.State)}
	}
	return nil
}

func validateKind(k string) error {
	if k != KindEpisode && k != KindClip {
		return &FieldError{Field: "kind", Msg: fmt.Sprintf("%q is not episode or clip", k)}
	}
	return nil
}

// WorkSubject is the subject a work's WorkUpserted is published on: the
// kind and a digest of the key (keys may hold characters subjects cannot),
// below SubjectWorkUpserted.
func WorkSubject(kind, key string) string {
	sum := sha256.Sum256([]byte(key))
	return SubjectWorkUpserted + "." + kind + "." + hex.EncodeToString(sum[:12])
}
