package events

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Event types of archive objects and audits.
const (
	TypeObjectRecorded = "archive.object.recorded"
	TypeObjectDeleted  = "archive.object.deleted"
	TypeAuditTask      = "audit.task"
)

// Subjects of archive objects and audit tasks.
const (
	// SubjectObjectRecorded carries ObjectRecorded (from ingest).
	SubjectObjectRecorded = "archive.object.recorded"
	// SubjectObjectDeleted carries ObjectDeleted.
	SubjectObjectDeleted = "archive.object.deleted"
	// SubjectAuditTaskHigh and SubjectAuditTaskLow carry bit-integrity
	// tasks: on-demand checks high, the cycle's checks low.
	SubjectAuditTaskHigh = "audit.task.high"
	// SubjectAuditTaskLow carries the scheduled checks.
	SubjectAuditTaskLow = "audit.task.low"

	// StreamArchive holds archive object events for every consumer.
	StreamArchive = "ARCHIVE"
	// StreamAuditHigh and StreamAuditLow are the auditor's task queues.
	StreamAuditHigh = "AUDIT_HIGH"
	// StreamAuditLow is the low-priority task queue.
	StreamAuditLow = "AUDIT_LOW"
)

// ObjectRecorded says that an object was stored and recorded in the
// inventory, with the checksum the archive computed (sha256, hex).
type ObjectRecorded struct {
	// Object is the object's key in the blob store.
	Object string `msgpack:"object" json:"object"`
	// SHA256 is its checksum.
	SHA256 string `msgpack:"sha256" json:"sha256"`
	// Size in bytes.
	Size int64 `msgpack:"size" json:"size"`
	// Properties are its properties (content type, ...).
	Properties map[string]string `msgpack:"properties,omitempty" json:"properties,omitempty"`
	// Update is set when the object replaced an earlier one.
	Update bool `msgpack:"update,omitempty" json:"update,omitempty"`
}

// EventType implements Event.
func (ObjectRecorded) EventType() string { return TypeObjectRecorded }

// EventSchemaVersion implements Event.
func (ObjectRecorded) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (o *ObjectRecorded) Validate() error {
	switch {
	case o.Object == "":
		return &FieldError{Field: "object", Msg: "is required"}
	case !sha256Hex.MatchString(o.SHA256):
		return &FieldError{Field: "sha256", Msg: "must be 64 lower-case hex digits"}
	case o.Size < 0:
		return &FieldError{Field: "size", Msg: "must not be negative"}
	}
	return nil
}

// ObjectDeleted says that an object was deleted from the archive.
type ObjectDeleted struct {
	// Object is the object's key.
	Object string `msgpack:"object" json:"object"`
}

// EventType implements Event.
func (ObjectDeleted) EventType() string { return TypeObjectDeleted }

// EventSchemaVersion implements Event.
func (ObjectDeleted) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (o *ObjectDeleted) Validate() error {
	if o.Object == "" {
		return &FieldError{Field: "object", Msg: "is required"}
	}
	return nil
}

// AuditTask asks for a bit-integrity check of one object.
type AuditTask struct {
	// Object is the object's key.
	Object string `msgpack:"object" json:"object"`
	// Reason is "scheduled" or "on-demand".
	Reason string `msgpack:"reason" json:"reason"`
	// Light compares the checksums without downloading the content.
	Light bool `msgpack:"light,omitempty" json:"light,omitempty"`
	// Due is when the scheduled check was due (zero for on-demand checks).
	Due time.Time `msgpack:"due" json:"due"`
}

// EventType implements Event.
func (AuditTask) EventType() string { return TypeAuditTask }

// EventSchemaVersion implements Event.
func (AuditTask) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (a *AuditTask) Validate() error {
	if a.Object == "" {
		return &FieldError{Field: "object", Msg: "is required"}
	}
	return nil
}

// AuditStreams returns the archive and audit streams.
func AuditStreams(replicas int) []jetstream.StreamConfig {
	q := func(name, subject, desc string) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: name, Description: desc, Subjects: []string{subject},
			Retention: jetstream.WorkQueuePolicy, MaxAge: 30 * 24 * time.Hour, Duplicates: defaultDuplicateWindow,
			Storage: jetstream.FileStorage, Replicas: replicas}
	}
	return []jetstream.StreamConfig{
		{Name: StreamArchive, Description: "Archive objects recorded and deleted, for the indexer, auditor and curator.",
			Subjects: []string{"archive.>"}, Retention: jetstream.LimitsPolicy, MaxAge: 30 * 24 * time.Hour,
			Duplicates: defaultDuplicateWindow, Storage: jetstream.FileStorage, Replicas: replicas},
		q(StreamAuditHigh, SubjectAuditTaskHigh, "On-demand bit-integrity checks."),
		q(StreamAuditLow, SubjectAuditTaskLow, "Scheduled bit-integrity checks."),
	}
}

// Auditor consumers.
var (
	// AuditorRecorded keeps the auditor's content index and audit log from
	// recorded objects.
	AuditorRecorded = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "auditor-recorded", Description: "auditor: content index and audit log",
		FilterSubject: SubjectObjectRecorded,
		AckPolicy:     jetstream.AckExplicitPolicy, AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// AuditorDeleted records deletions in the audit log.
	AuditorDeleted = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "auditor-deleted", Description: "auditor: deletions",
		FilterSubject: SubjectObjectDeleted,
		AckPolicy:     jetstream.AckExplicitPolicy, AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// AuditorReplicate copies every recorded object to the second copy
	// (AUDITOR_SECONDARY_BLOB_URL), and AuditorUnreplicate deletes every
	// deleted one there. A copy waits out an outage of either store: it is
	// delivered again, backing off, for as long as it takes (no dead
	// letter for a store that is down).
	AuditorReplicate = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "auditor-replicate", Description: "auditor: the second copy, written",
		FilterSubject: SubjectObjectRecorded,
		AckPolicy:     jetstream.AckExplicitPolicy, AckWait: 5 * time.Minute, MaxDeliver: -1, MaxAckPending: 64,
		BackOff: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute},
	}}
	// AuditorUnreplicate deletes deleted objects from the second copy.
	AuditorUnreplicate = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "auditor-unreplicate", Description: "auditor: the second copy, deleted from",
		FilterSubject: SubjectObjectDeleted,
		AckPolicy:     jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1, MaxAckPending: 256,
		BackOff: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute},
	}}
	// AuditorHigh and AuditorLow are the worker manager's task consumers. A
	// task is tried three times (MaxDeliver); the third failure dead-letters
	// it with its reason.
	AuditorHigh = auditQueue(StreamAuditHigh, "auditor-high")
	// AuditorLow reads the scheduled checks.
	AuditorLow = auditQueue(StreamAuditLow, "auditor-low")
)

// AuditMaxAttempts is how often a task's check is tried (the outcome
// table's retries: "retry later" until the last).
const AuditMaxAttempts = 3

// AuditMaxFailures is how many failures a task may have before it is
// dead-lettered (the worker manager's three). Attempts and failures are
// separate budgets; JetStream's MaxDeliver bounds their sum.
const AuditMaxFailures = 3

func auditQueue(stream, durable string) Consumer {
	return Consumer{Stream: stream, Config: jetstream.ConsumerConfig{
		Durable: durable, Description: "auditor worker manager", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: time.Minute, MaxDeliver: AuditMaxAttempts + AuditMaxFailures, MaxAckPending: 1000,
	}}
}
