package events

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Event types of web-archive indexing.
const (
	TypeIndexTask     = "index.task"
	TypeIndexCDXReady = "index.cdx.ready"
)

// Subjects and streams of web-archive indexing.
const (
	// SubjectIndexTask carries one archive file to index.
	SubjectIndexTask = "index.task"
	// SubjectIndexCDXReady says a file's CDX output is ready to merge.
	SubjectIndexCDXReady = "index.cdx.ready"
	// StreamIndexTasks is the indexers' work queue.
	StreamIndexTasks = "INDEX_TASKS"
	// StreamIndexReady holds ready outputs for the aggregator.
	StreamIndexReady = "INDEX_READY"
)

// IndexTask asks an indexer to index one archive file.
type IndexTask struct {
	// File is the archive file's key in the blob store.
	File string `msgpack:"file" json:"file"`
	// Attempt numbers the file's indexing attempts (1 for the first).
	Attempt int `msgpack:"attempt" json:"attempt"`
}

// EventType implements Event.
func (IndexTask) EventType() string { return TypeIndexTask }

// EventSchemaVersion implements Event.
func (IndexTask) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (t *IndexTask) Validate() error {
	if t.File == "" {
		return &FieldError{Field: "file", Msg: "is required"}
	}
	return nil
}

// CDXFileName is the name an archive file's CDX lines give it (the CDX
// "filename" field), which a Wayback resolves to the file's location
// through the path index (pywb's path resolver), or by joining it to a
// prefix URL: the file's blob key, escaped as the path of a URL (RFC 3986:
// every byte but a letter, a digit, "/" and -._~!$&'()*+,;=:@ as %XX, "%"
// itself included). One name per key, one key per name: every stored
// version of every object's "crawl.warc.gz" has a name of its own, and a
// URL path of the name, decoded, is the key again.
func CDXFileName(key string) string {
	const keep = "-._~!$&'()*+,;=:@/"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// IndexCDXReady says an archive file was indexed: its sorted CDX11 lines
// are in the blob store under Output, replacing any earlier output of the
// same file.
type IndexCDXReady struct {
	// File is the archive file's key.
	File string `msgpack:"file" json:"file"`
	// Output is the CDX output's key in the blob store.
	Output string `msgpack:"output" json:"output"`
	// Lines is the number of CDX lines.
	Lines int64 `msgpack:"lines" json:"lines"`
	// Complete is false when the file had a fault: the lines cover the
	// records before it.
	Complete bool `msgpack:"complete" json:"complete"`
}

// EventType implements Event.
func (IndexCDXReady) EventType() string { return TypeIndexCDXReady }

// EventSchemaVersion implements Event.
func (IndexCDXReady) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (r *IndexCDXReady) Validate() error {
	switch {
	case r.File == "":
		return &FieldError{Field: "file", Msg: "is required"}
	case r.Output == "":
		return &FieldError{Field: "output", Msg: "is required"}
	}
	return nil
}

// IndexStreams returns the indexing streams.
func IndexStreams(replicas int) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{Name: StreamIndexTasks, Description: "Archive files to index, one per task.", Subjects: []string{SubjectIndexTask},
			Retention: jetstream.WorkQueuePolicy, MaxAge: 7 * 24 * time.Hour, Duplicates: defaultDuplicateWindow,
			Storage: jetstream.FileStorage, Replicas: replicas},
		{Name: StreamIndexReady, Description: "CDX outputs ready to merge.", Subjects: []string{SubjectIndexCDXReady},
			Retention: jetstream.LimitsPolicy, MaxAge: 30 * 24 * time.Hour, Duplicates: defaultDuplicateWindow,
			Storage: jetstream.FileStorage, Replicas: replicas},
	}
}

// Indexer consumers.
var (
	// IndexerRecorded learns of archive files from recorded objects.
	IndexerRecorded = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "indexer-recorded", Description: "indexer: archive files recorded",
		FilterSubject: SubjectObjectRecorded, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// IndexerDeleted learns of archive files deleted from the archive (an
	// object withdrawn): they are not indexed.
	IndexerDeleted = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "indexer-deleted", Description: "indexer: archive files deleted, not indexed",
		FilterSubject: SubjectObjectDeleted, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// AggregatorReady is the aggregator's consumer of ready outputs.
	AggregatorReady = Consumer{Stream: StreamIndexReady, Config: jetstream.ConsumerConfig{
		Durable: "aggregator-ready", Description: "aggregator: outputs to merge",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// AggregatorDeleted takes the archive files deleted from the archive
	// (an object withdrawn) out of the index.
	AggregatorDeleted = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "aggregator-deleted", Description: "aggregator: archive files deleted, out of the index",
		FilterSubject: SubjectObjectDeleted,
		AckPolicy:     jetstream.AckExplicitPolicy, AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// Indexers is the indexers' shared consumer of tasks. A task that
	// fails is not redelivered: the registry counts the failure and
	// queues the file again, alone, until it is parked.
	Indexers = Consumer{Stream: StreamIndexTasks, Config: jetstream.ConsumerConfig{
		Durable: "indexers", Description: "indexers: one file per task",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
)
