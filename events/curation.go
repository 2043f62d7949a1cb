package events

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Event types of curation events: episodes and clips as other systems curate them.
const (
	TypeEpisodeUpserted = "curation.episode.upserted"
	TypeClipUpserted    = "curation.clip.upserted"
)

// CuratedAudio is what a curating system says of a piece of audio: an
// episode or a clip. EpisodeUpserted and ClipUpserted are this map under two
// event types.
type CuratedAudio struct {
	// ID is the record's id in the curating system (1 to 200 characters,
	// no whitespace).
	ID string `msgpack:"id" json:"id"`
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

// Validate reports the first invalid field.
func (a *CuratedAudio) Validate() error {
	id, m, durationMS, initial, latest := a.ID, a.Media, a.DurationMS, a.InitialCuratedAt, a.LatestCuratedAt
	if err := ValidateID("id", id); err != nil {
		return err
	}
	switch {
	case m.Key == "":
		return &FieldError{Field: "media.key", Msg: "is required"}
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
	}
	return nil
}
