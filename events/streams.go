package events

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Subjects. Every subject a service publishes to or consumes from is named
// here and nowhere else.
const (
	// SubjectEpisodeUpserted is the subjects of EpisodeUpserted events:
	// each source publishes on its own, curation.<source>.episode.upserted
	// (CurationSubject), and its NATS user may publish only there.
	SubjectEpisodeUpserted = "curation.*.episode.upserted"
	// SubjectClipUpserted is the subjects of ClipUpserted events,
	// curation.<source>.clip.upserted.
	SubjectClipUpserted = "curation.*.clip.upserted"
	// SubjectEpisodeUpsertedUnsourced and SubjectClipUpsertedUnsourced are
	// the subjects of earlier versions, without the source: the curator
	// still reads what they hold, and no one may publish on them.
	SubjectEpisodeUpsertedUnsourced = "curation.episode.upserted"
	SubjectClipUpsertedUnsourced    = "curation.clip.upserted"

	// SubjectRejectedPrefix prefixes the rejections of each source's
	// curation events, rejected.<source> (RejectedSubject): what its
	// publisher may read of why an event was refused.
	SubjectRejectedPrefix = "rejected"

	// SubjectGraphMatched carries the matcher's GraphMatched results.
	SubjectGraphMatched = "match.graph.matched"
	// SubjectWorkUpserted carries the merger's WorkUpserted outputs: each
	// work on a subject of its own below it (WorkSubject), so that the WORKS
	// stream keeps the newest message per work.
	SubjectWorkUpserted = "works.work.upserted"

	// SubjectDeadLetterPrefix prefixes dead-lettered messages:
	// deadletter.<stream>.<consumer>.
	SubjectDeadLetterPrefix = "deadletter"

	// SubjectMaxDeliveriesAdvisories is the advisory JetStream raises when a
	// message reaches a consumer's MaxDeliver.
	SubjectMaxDeliveriesAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"
)

// Stream names.
const (
	// StreamCuration holds curation events from other systems.
	StreamCuration = "CURATION"
	// StreamMatches is the work queue from the matcher to the merger.
	StreamMatches = "MATCHES"
	// StreamWorks holds merged works for the research pipeline.
	StreamWorks = "WORKS"
	// StreamDeadLetter holds messages that could not be processed, with the
	// reason in their headers.
	StreamDeadLetter = "DEADLETTER"
	// StreamAdvisories captures max-deliveries advisories until the
	// dead-letter mover has moved the message they name.
	StreamAdvisories = "DLQ_ADVISORIES"
	// StreamRejected holds the rejections of curation events, a subject per
	// source, for their publishers to read.
	StreamRejected = "REJECTED"
)

// CurationSubject is the subject a source publishes a curation event of
// eventType on: curation.<source>.episode.upserted for
// TypeEpisodeUpserted ("curation.episode.upserted").
func CurationSubject(source, eventType string) string {
	return "curation." + source + "." + strings.TrimPrefix(eventType, "curation.")
}

// SourceOfSubject is the source a curation subject names (ok false for a
// subject of no source, such as an unsourced one of earlier versions).
func SourceOfSubject(subject string) (source string, ok bool) {
	t := strings.Split(subject, ".")
	if len(t) != 4 || t[0] != "curation" || t[1] == "" {
		return "", false
	}
	return t[1], true
}

// RejectedSubject is where the rejections of source's curation events go.
func RejectedSubject(source string) string { return SubjectRejectedPrefix + "." + source }

// Headers set on dead-lettered messages. The original message's own headers
// are kept; its Nats-* headers are renamed with HeaderOriginalPrefix so that
// they do not act on the dead-letter stream.
const (
	HeaderDLQReason     = "Archivist-DLQ-Reason"
	HeaderDLQStream     = "Archivist-DLQ-Stream"
	HeaderDLQConsumer   = "Archivist-DLQ-Consumer"
	HeaderDLQSubject    = "Archivist-DLQ-Subject"
	HeaderDLQSequence   = "Archivist-DLQ-Sequence"
	HeaderDLQDeliveries = "Archivist-DLQ-Deliveries"
	HeaderDLQTime       = "Archivist-DLQ-Time"
	// HeaderReplayedBy names who replayed a dead letter, on the message
	// it sent again (archivist work replay).
	HeaderReplayedBy          = "Archivist-Replayed-By"
	HeaderOriginalPrefix      = "Archivist-Original-"
	defaultDuplicateWindow    = 2 * time.Minute
	deadLetterRetention       = 30 * 24 * time.Hour
	curationRetention         = 30 * 24 * time.Hour
	advisoryRetention         = 7 * 24 * time.Hour
	defaultConsumerAckWait    = 30 * time.Second
	defaultConsumerMaxDeliver = 5
)

// The bounds of what one source (or one consumer's dead letters) may keep
// in JetStream: at most MaxCurationPerSubject messages of each of its
// subjects (for a source: waiting for the curator), each at most
// MaxCurationMessage bytes.
const (
	MaxCurationPerSubject = 100_000
	MaxCurationMessage    = 64 << 10
)

// Streams returns every stream Archivist uses, with the given number of
// replicas (1 for the embedded server, 3 in a production cluster).
// Services create or update them idempotently at start.
func Streams(replicas int) []jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	return append([]jetstream.StreamConfig{
		{
			Name:        StreamCuration,
			Description: "Curation events from other systems: episodes and clips.",
			Subjects:    []string{"curation.>"},
			// An event is kept until the curator's consumers have it
			// (InterestConsumers, made with the stream), and no longer.
			Retention: jetstream.InterestPolicy,
			MaxAge:    curationRetention,
			// Bounded per source (a subject per source and kind): at most
			// MaxCurationPerSubject of a source's events wait for the
			// curator, and past that a publish is refused (the publisher
			// retries: the HTTP API answers 503 with Retry-After), so a
			// flood or a full resend of a source slows to the curator's
			// pace instead of pushing out events not yet stored. Under
			// limits retention it pushed out its own oldest: a resend of a
			// source of 400,000 records faster than the curator lost
			// 300,000 of them, silently. No event is larger than a record
			// can be.
			MaxMsgsPerSubject:    MaxCurationPerSubject,
			Discard:              jetstream.DiscardNew,
			DiscardNewPerSubject: true,
			MaxMsgSize:           MaxCurationMessage,
			Duplicates:           defaultDuplicateWindow,
			Storage:              jetstream.FileStorage,
			Replicas:             replicas,
		},
		{
			Name:        StreamMatches,
			Description: "Matcher results (work graphs) waiting for the merger.",
			Subjects:    []string{"match.>"},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      curationRetention,
			Duplicates:  defaultDuplicateWindow,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		},
		{
			Name:        StreamWorks,
			Description: "Merged works, redirects and gone keys, versioned by the matcher's time: the newest message of each work.",
			// Each work on a subject of its own (WorkSubject), one message
			// per subject: the daily resync publishes every work again, and
			// the stream held one copy per day of retention. The bare
			// SubjectWorkUpserted of earlier versions is not taken: one
			// subject for every work would keep one work in all.
			Subjects:          []string{SubjectWorkUpserted + ".>"},
			Retention:         jetstream.LimitsPolicy,
			MaxMsgsPerSubject: 1,
			MaxAge:            curationRetention,
			Duplicates:        defaultDuplicateWindow,
			Storage:           jetstream.FileStorage,
			Replicas:          replicas,
		},
		{
			Name:        StreamDeadLetter,
			Description: "Messages no consumer could process, with the reason in Archivist-DLQ-* headers.",
			Subjects:    []string{SubjectDeadLetterPrefix + ".>"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      deadLetterRetention,
			// Bounded per consumer: a flood of bad messages pushes out
			// only that consumer's oldest letters.
			MaxMsgsPerSubject: MaxCurationPerSubject,
			Duplicates:        defaultDuplicateWindow,
			Storage:           jetstream.FileStorage,
			Replicas:          replicas,
		},
		{
			Name:        StreamRejected,
			Description: "Rejections of curation events (event id, subject, reason), a subject per source, for their publishers to read.",
			Subjects:    []string{SubjectRejectedPrefix + ".>"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      deadLetterRetention,
			// Bounded per source: one publisher's flood of bad events
			// pushes out only its own oldest rejections.
			MaxMsgsPerSubject: 100000,
			Duplicates:        defaultDuplicateWindow,
			Storage:           jetstream.FileStorage,
			Replicas:          replicas,
		},
		{
			Name:        StreamAdvisories,
			Description: "Max-deliveries advisories, kept until the dead-letter mover has moved the message they name.",
			Subjects:    []string{SubjectMaxDeliveriesAdvisories},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      advisoryRetention,
			Duplicates:  defaultDuplicateWindow,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		},
	}, append(append(ResearchStreams(replicas), AuditStreams(replicas)...), IndexStreams(replicas)...)...)
}

// Consumer is a durable pull consumer on a stream.
type Consumer struct {
	// Stream is the stream the consumer reads.
	Stream string
	// Config is the consumer's JetStream configuration; Durable is its name.
	Config jetstream.ConsumerConfig
}

// Durable consumers. Each is owned by one service; its replicas share it.
var (
	// CuratorEpisodes is the curator's consumer of episode curation events.
	CuratorEpisodes = Consumer{
		Stream: StreamCuration,
		Config: jetstream.ConsumerConfig{
			Durable:        "curator-episodes",
			Description:    "curator: stores curated episodes, versioned by sent_at",
			FilterSubjects: []string{SubjectEpisodeUpserted, SubjectEpisodeUpsertedUnsourced},
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        defaultConsumerAckWait,
			MaxDeliver:     defaultConsumerMaxDeliver,
			MaxAckPending:  1000,
		},
	}

	// CuratorClips is the curator's consumer of clip curation events.
	CuratorClips = Consumer{
		Stream: StreamCuration,
		Config: jetstream.ConsumerConfig{
			Durable:        "curator-clips",
			Description:    "curator: stores curated clips, versioned by sent_at",
			FilterSubjects: []string{SubjectClipUpserted, SubjectClipUpsertedUnsourced},
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        defaultConsumerAckWait,
			MaxDeliver:     defaultConsumerMaxDeliver,
			MaxAckPending:  1000,
		},
	}

	// CuratorMerger is the curator's merger: it turns match results into
	// merged works.
	CuratorMerger = Consumer{
		Stream: StreamMatches,
		Config: jetstream.ConsumerConfig{
			Durable:       "curator-merger",
			Description:   "curator: builds merged works from matcher results, versioned by the matcher's time",
			FilterSubject: SubjectGraphMatched,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       defaultConsumerAckWait,
			MaxDeliver:    defaultConsumerMaxDeliver,
			MaxAckPending: 1000,
		},
	}

	// DeadLetterMover is the shared consumer of max-deliveries advisories:
	// whichever service replica takes an advisory moves the message it names
	// into the dead-letter stream.
	DeadLetterMover = Consumer{
		Stream: StreamAdvisories,
		Config: jetstream.ConsumerConfig{
			Durable:       "deadletter-mover",
			Description:   "moves max-delivered messages into DEADLETTER",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       defaultConsumerAckWait,
			MaxDeliver:    -1,
			MaxAckPending: 100,
		},
	}
)

// InterestConsumers are the consumers whose interest keeps the events of
// an interest-retention stream (CURATION): they are made with the streams
// (bus.EnsureStreams, archivist migrate), so an event published before
// the curator first starts waits for it instead of being dropped for want
// of a consumer.
var InterestConsumers = []Consumer{CuratorEpisodes, CuratorClips}

// DeadLetterSubject is the subject a message of stream and consumer is
// dead-lettered on.
func DeadLetterSubject(stream, consumer string) string {
	return SubjectDeadLetterPrefix + "." + stream + "." + consumer
}

// ParseDeadLetterSubject is the stream and consumer a dead letter's own
// subject names (DeadLetterSubject); false for another subject. Unlike the
// dead letter's headers, which its publisher writes, the subject is one a
// service may publish on only for its own consumers.
func ParseDeadLetterSubject(subject string) (stream, consumer string, ok bool) {
	rest, ok := strings.CutPrefix(subject, SubjectDeadLetterPrefix+".")
	if !ok {
		return "", "", false
	}
	stream, consumer, ok = strings.Cut(rest, ".")
	if !ok || stream == "" || consumer == "" || strings.Contains(consumer, ".") {
		return "", "", false
	}
	return stream, consumer, true
}
