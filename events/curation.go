package events

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Event types of curation events: episodes and clips as other systems curate
// them, and the curator's rejection of one.
const (
	TypeEpisodeUpserted = "curation.episode.upserted"
	TypeClipUpserted    = "curation.clip.upserted"
	TypeRejected        = "curation.rejected"
)

// Rejected tells a curating system that the curator refused one of its
// events for good, and why: published on its source's RejectedSubject,
// which its publisher may read (the dead letter, for operators, holds the
// event itself).
type Rejected struct {
	// EventID is the refused event's id (its Nats-Msg-Id), empty when the
	// message had none.
	EventID string `msgpack:"event_id" json:"event_id"`
	// Subject is the subject it was published on.
	Subject string `msgpack:"subject" json:"subject"`
	// Sequence is its sequence in the CURATION stream.
	Sequence uint64 `msgpack:"sequence" json:"sequence"`
	// Reason says what is wrong with it.
	Reason string `msgpack:"reason" json:"reason"`
}

// EventType implements Event.
func (Rejected) EventType() string { return TypeRejected }

// EventSchemaVersion implements Event.
func (Rejected) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (r *Rejected) Validate() error {
	switch {
	case r.Subject == "":
		return &FieldError{Field: "subject", Msg: "is required"}
	case r.Reason == "":
		return &FieldError{Field: "reason", Msg: "is required"}
	}
	return nil
}

// CuratedAudio is what a curating system says of a piece of audio: an
// episode or a clip. EpisodeUpserted and ClipUpserted are this map under two
// event types.
type CuratedAudio struct {
	// ID is the record's id in the curating system (1 to 200 characters,
	// no whitespace).
	ID string `msgpack:"id" json:"id"`
	// Source names the curating system ("feed", "station-log", "wiki": lower
	// case letters, digits, '.', '_' and '-'). Empty means the envelope's
	// producer. A record is known by source and id together.
	Source string `msgpack:"source,omitempty" json:"source,omitempty"`
	// SameAs lists records of other sources (or of this one) that describe the
	// same episode or clip. The list replaces the one the record had: an
	// empty list unlinks it.
	SameAs []Ref `msgpack:"same_as,omitempty" json:"same_as,omitempty"`
	// Title is the record's title.
	Title string `msgpack:"title" json:"title"`
	// Media is where the audio lives.
	Media Media `msgpack:"media" json:"media"`
	// DurationMS is the audio's length in milliseconds (0 if unknown).
	DurationMS int64 `msgpack:"duration_ms" json:"duration_ms"`
	// Priority orders research: a higher number is researched first.
	Priority int32 `msgpack:"priority" json:"priority"`
	// InitialCuratedAt is when the record was first curated.
	InitialCuratedAt time.Time `msgpack:"initial_curated_at" json:"initial_curated_at"`
	// LatestCuratedAt is when the record was last curated.
	LatestCuratedAt time.Time `msgpack:"latest_curated_at" json:"latest_curated_at"`
}

// EpisodeUpserted says that a curating system created or changed an episode.
// The curator keeps the newest version of each episode by the envelope's
// SentAt.
type EpisodeUpserted CuratedAudio

// ClipUpserted says that a curating system created or changed a clip: a short
// piece of audio (a jingle, a drop, a spoken bit) to be located in episodes.
type ClipUpserted CuratedAudio

// Ref names a source record.
type Ref struct {
	// Source is the curating system.
	Source string `msgpack:"source" json:"source"`
	// ID is the record's id in that system.
	ID string `msgpack:"id" json:"id"`
}

// Key is the record's key, "source:id".
func (r Ref) Key() string { return r.Source + ":" + r.ID }

// MaxSameAs caps a record's same-as list.
const MaxSameAs = 100

// MaxGraphMembers caps a work graph (a connected component of same-as
// links): the matcher refuses, and records with its reason, a link that
// would join more records than this into one work, so that no publisher's
// links make a graph, and the work another source's records are part of,
// too large to deliver.
const MaxGraphMembers = 1000

var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidateSource checks a source name.
func ValidateSource(field, s string) error {
	if !sourceName.MatchString(s) {
		return &FieldError{Field: field, Msg: "must be 1 to 64 of a-z, 0-9, '_', '-', starting with a letter or digit (no '.', wildcard or space: the name scopes NATS subjects, users and inboxes)"}
	}
	return nil
}

// Media locates a piece of audio in the blob store.
type Media struct {
	// Key is the object's key in the blob store, e.g. "audio/ep-0001.mp3".
	Key string `msgpack:"key" json:"key"`
	// SHA256 is the object's sha256 as 64 lower-case hex digits.
	SHA256 string `msgpack:"sha256" json:"sha256"`
}

// EventType implements Event.
func (EpisodeUpserted) EventType() string { return TypeEpisodeUpserted }

// EventSchemaVersion implements Event.
func (EpisodeUpserted) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (e *EpisodeUpserted) Validate() error { return (*CuratedAudio)(e).Validate() }

// EventType implements Event.
func (ClipUpserted) EventType() string { return TypeClipUpserted }

// EventSchemaVersion implements Event.
func (ClipUpserted) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (c *ClipUpserted) Validate() error { return (*CuratedAudio)(c).Validate() }

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateID checks a record id: 1 to 200 characters without whitespace.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return &FieldError{Field: field, Msg: "is required"}
	case len(id) > 200:
		return &FieldError{Field: field, Msg: fmt.Sprintf("is %d bytes long, at most 200 allowed", len(id))}
	case strings.ContainsAny(id, " \t\r\n"):
		return &FieldError{Field: field, Msg: "must not contain whitespace"}
	}
	return nil
}

// The bounds of a record's free-text fields (N27): with MaxSameAs links
// of ValidateID's 200 bytes, a record's message stays within
// MaxCurationMessage.
const (
	// MaxTitleBytes is the longest title.
	MaxTitleBytes = 2000
	// MaxMediaKeyBytes is the longest media key (S3's own bound).
	MaxMediaKeyBytes = 1024
)

// Validate reports the first invalid field.
func (a *CuratedAudio) Validate() error {
	id, m, durationMS, initial, latest := a.ID, a.Media, a.DurationMS, a.InitialCuratedAt, a.LatestCuratedAt
	if err := ValidateID("id", id); err != nil {
		return err
	}
	switch {
	case len(a.Title) > MaxTitleBytes:
		return &FieldError{Field: "title", Msg: fmt.Sprintf("is %d bytes long, at most %d allowed", len(a.Title), MaxTitleBytes)}
	case m.Key == "":
		return &FieldError{Field: "media.key", Msg: "is required"}
	case len(m.Key) > MaxMediaKeyBytes:
		return &FieldError{Field: "media.key", Msg: fmt.Sprintf("is %d bytes long, at most %d allowed", len(m.Key), MaxMediaKeyBytes)}
	case strings.IndexFunc(m.Key, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0:
		return &FieldError{Field: "media.key", Msg: "must not contain control characters"}
	case strings.HasPrefix(m.Key, "/") || strings.Contains("/"+m.Key+"/", "/../"):
		return &FieldError{Field: "media.key", Msg: "must be a relative key without '..'"}
	case m.SHA256 != "" && !sha256Hex.MatchString(m.SHA256):
		return &FieldError{Field: "media.sha256", Msg: "must be 64 lower-case hex digits"}
	case durationMS < 0:
		return &FieldError{Field: "duration_ms", Msg: "must not be negative"}
	case initial.IsZero():
		return &FieldError{Field: "initial_curated_at", Msg: "is required"}
	case latest.IsZero():
		return &FieldError{Field: "latest_curated_at", Msg: "is required"}
	case latest.Before(initial):
		return &FieldError{Field: "latest_curated_at", Msg: "is before initial_curated_at"}
	case len(a.SameAs) > MaxSameAs:
		return &FieldError{Field: "same_as", Msg: fmt.Sprintf("has %d entries, at most %d allowed", len(a.SameAs), MaxSameAs)}
	}
	if a.Source != "" {
		if err := ValidateSource("source", a.Source); err != nil {
			return err
		}
	}
	for i, r := range a.SameAs {
		if err := ValidateSource(fmt.Sprintf("same_as[%d].source", i), r.Source); err != nil {
			return err
		}
		if err := ValidateID(fmt.Sprintf("same_as[%d].id", i), r.ID); err != nil {
			return err
		}
	}
	return nil
}
