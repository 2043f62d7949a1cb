// Package events defines what Archivist services say to each other: the
// envelope every message travels in, every event type as a Go struct, and the
// subjects, streams and durable consumers that carry them.
//
// An event on the wire is a msgpack map (the [Envelope]) whose payload is the
// msgpack map of one event type. The event type and id also travel in NATS
// headers ([HeaderType], and JetStream's Nats-Msg-Id) so that routing and
// de-duplication need no decoding.
package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// NATS headers set on every Archivist message.
const (
	// HeaderType carries the envelope's event type.
	HeaderType = "Archivist-Type"
	// HeaderProducer carries the envelope's producer.
	HeaderProducer = "Archivist-Producer"
	// HeaderMsgID is JetStream's de-duplication header; it carries the event id.
	HeaderMsgID = "Nats-Msg-Id"
)

// Envelope is the outer map of every event. SentAt is the time the producer
// sent the event: the version of matcher-versioning.txt. Versions are compared
// at microsecond precision (PostgreSQL's), so SentAt is always truncated to it.
type Envelope struct {
	// ID is unique per event (a UUIDv7 for events Archivist produces); it is
	// also the JetStream message id, so a re-published event is de-duplicated.
	ID string `msgpack:"id" json:"id"`
	// Type names the payload's event type, for example "curation.episode.upserted".
	Type string `msgpack:"type" json:"type"`
	// SchemaVersion is the version of the payload's schema.
	SchemaVersion int `msgpack:"schema_version" json:"schema_version"`
	// Producer names the system or service that sent the event.
	Producer string `msgpack:"producer" json:"producer"`
	// SentAt is when the producer sent the event (UTC, microseconds).
	SentAt time.Time `msgpack:"sent_at" json:"sent_at"`
	// Payload is the msgpack encoding of the event type's struct.
	Payload msgpack.RawMessage `msgpack:"payload" json:"-"`

	// checked is set by Unmarshal, whose bounds scan covered the payload.
	checked bool
}

// Event is implemented by every payload type.
type Event interface {
	// EventType is the envelope type of the event, e.g. "curation.episode.upserted".
	EventType() string
	// EventSchemaVersion is the schema version the struct encodes.
	EventSchemaVersion() int
	// Validate reports the first invalid field as a *FieldError.
	Validate() error
}

// MaxClockSkew is how far in the future a curation event's time (its
// version) may be, over HTTP and over NATS alike: a later one is refused.
const MaxClockSkew = 5 * time.Minute

// Now returns the current time as an envelope time: UTC, truncated to
// microseconds so that it survives a round trip through PostgreSQL unchanged.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// New wraps e in an envelope sent now by producer, with a fresh UUIDv7 id.
func New(producer string, e Event) (Envelope, error) {
	return NewAt(producer, Now(), e)
}

// NewAt is New with an explicit send time (truncated to microseconds).
func NewAt(producer string, sentAt time.Time, e Event) (Envelope, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Envelope{}, fmt.Errorf("new event id: %w", err)
	}
	payload, err := msgpack.Marshal(e)
	if err != nil {
		return Envelope{}, fmt.Errorf("encode %s payload: %w", e.EventType(), err)
	}
	return Envelope{
		ID:            id.String(),
		Type:          e.EventType(),
		SchemaVersion: e.EventSchemaVersion(),
		Producer:      producer,
		SentAt:        sentAt.UTC().Truncate(time.Microsecond),
		Payload:       payload,
	}, nil
}

// Marshal encodes the envelope as msgpack.
func (e Envelope) Marshal() ([]byte, error) {
	b, err := msgpack.Marshal(&e)
	if err != nil {
		return nil, fmt.Errorf("encode envelope %s: %w", e.ID, err)
	}
	return b, nil
}

// Unmarshal decodes and checks a msgpack envelope. It fails on bytes that are
// not an envelope or break DefaultLimits (checked before anything is
// allocated), and on an envelope without id, type, producer, send time or
// payload.
func Unmarshal(b []byte) (Envelope, error) {
	var e Envelope
	if err := UnmarshalMsgpack(b, &e, DefaultLimits, false); err != nil {
		return Envelope{}, fmt.Errorf("decode envelope: %w", err)
	}
	if err := e.check(); err != nil {
		return Envelope{}, err
	}
	e.SentAt = e.SentAt.UTC().Truncate(time.Microsecond)
	e.checked = true
	return e, nil
}

func (e Envelope) check() error {
	switch {
	case e.ID == "":
		return &FieldError{Field: "id", Msg: "is required"}
	case e.Type == "":
		return &FieldError{Field: "type", Msg: "is required"}
	case e.SchemaVersion < 1:
		return &FieldError{Field: "schema_version", Msg: "must be at least 1"}
	case e.Producer == "":
		return &FieldError{Field: "producer", Msg: "is required"}
	case e.SentAt.IsZero():
		return &FieldError{Field: "sent_at", Msg: "is required"}
	case len(e.Payload) == 0:
		return &FieldError{Field: "payload", Msg: "is required"}
	}
	return nil
}

// Decode decodes the envelope's payload into a T, checking that the envelope
// carries T's type and a schema version T understands, and validates it.
func Decode[T any, PT interface {
	*T
	Event
}](e Envelope) (*T, error) {
	v := PT(new(T))
	if e.Type != v.EventType() {
		return nil, &FieldError{Field: "type", Msg: fmt.Sprintf("is %q, want %q", e.Type, v.EventType())}
	}
	if e.SchemaVersion > v.EventSchemaVersion() {
		return nil, &FieldError{Field: "schema_version", Msg: fmt.Sprintf("%d is newer than the %d this service understands", e.SchemaVersion, v.EventSchemaVersion())}
	}
	var err error
	if e.checked {
		err = decodeMsgpack(e.Payload, v, false)
	} else {
		err = UnmarshalMsgpack(e.Payload, v, DefaultLimits, false)
	}
	if err != nil {
		return nil, fmt.Errorf("decode %s payload: %w", e.Type, err)
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return (*T)(v), nil
}

// FieldError says which field of an event is invalid and why.
type FieldError struct {
	// Field is the field's name as it appears on the wire (dotted for nested fields).
	Field string
	// Msg says what is wrong with it.
	Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// AsFieldError reports whether err is or wraps a *FieldError.
func AsFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}
