package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
)

// deadLetter copies a message into the dead-letter stream with the reason
// and where it came from. Its own headers are kept; Nats-* headers are
// renamed so that they do not act again (a Nats-Msg-Id would de-duplicate, a
// Nats-TTL would expire the copy). The copy's message id is derived from
// stream, consumer and sequence, so dead-lettering the same message twice
// stores it once.
func (b *Bus) deadLetter(ctx context.Context, stream, consumer string, seq uint64, subject string, hdr nats.Header, data []byte, deliveries uint64, reason string) error {
	m := nats.NewMsg(events.DeadLetterSubject(stream, consumer))
	m.Data = data
	for k, vs := range hdr {
		if strings.HasPrefix(k, "Nats-") {
			k = events.HeaderOriginalPrefix + k
		}
		for _, v := range vs {
			m.Header.Add(k, v)
		}
	}
	m.Header.Set(events.HeaderDLQReason, reason)
	m.Header.Set(events.HeaderDLQStream, stream)
	m.Header.Set(events.HeaderDLQConsumer, consumer)
	m.Header.Set(events.HeaderDLQSubject, subject)
	m.Header.Set(events.HeaderDLQSequence, strconv.FormatUint(seq, 10))
	m.Header.Set(events.HeaderDLQDeliveries, strconv.FormatUint(deliveries, 10))
	m.Header.Set(events.HeaderDLQTime, events.Now().Format("2006-01-02T15:04:05.000000Z07:00"))
	m.Header.Set(events.HeaderMsgID, fmt.Sprintf("dlq:%s:%s:%d", stream, consumer, seq))
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish to dead-letter stream: %w", err)
	}
	return nil
}

// maxDeliveriesAdvisory is the part of JetStream's
// io.nats.jetstream.advisory.v1.max_deliver advisory the mover needs.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// StartDeadLetterMover starts moving messages that reached their consumer's
// MaxDeliver into the dead-letter stream. JetStream leaves such messages where
// they are and raises an advisory, which the DLQ_ADVISORIES stream captures;
// the mover fetches the message it names, republishes it to DEADLETTER with
// the reason, and deletes it from a work-queue stream (from any other stream
// it is left in place: other consumers may still need it). Every service runs
// a mover of the advisories of its own consumers (events.DeadLetterMoverOf),
// so that its NATS user may read and delete messages only in the streams
// it consumes; the replicas of a service share one durable consumer.
func (b *Bus) StartDeadLetterMover(ctx context.Context) (*Subscription, error) {
	c := events.DeadLetterMoverOf(b.producer)
	if c.Config.Durable != events.DeadLetterMover.Config.Durable {
		// The mover of every consumer, shared by earlier versions, takes
		// every advisory; on a work-queue stream no filtered mover can be
		// made beside it. It goes (its advisories stay in the stream for
		// the movers of the services).
		if err := b.js.DeleteConsumer(ctx, events.StreamAdvisories, events.DeadLetterMover.Config.Durable); err != nil &&
			!errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("remove the shared dead-letter mover of earlier versions: %w", err)
		}
	}
	return b.ConsumeRaw(ctx, c, b.moveMaxDelivered)
}

func (b *Bus) moveMaxDelivered(ctx context.Context, msg jetstream.Msg) error {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(msg.Data(), &adv); err != nil || adv.Stream == "" || adv.StreamSeq == 0 {
		return decodeError{fmt.Errorf("undecodable max-deliveries advisory: %v", err)}
	}
	log := b.log.With("stream", adv.Stream, "consumer", adv.Consumer, "seq", adv.StreamSeq)
	st, err := b.js.Stream(ctx, adv.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		log.WarnContext(ctx, "max-delivered message's stream is gone; nothing to move")
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", adv.Stream, err)
	}
	raw, err := st.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		log.InfoContext(ctx, "max-delivered message already gone (moved, expired or acked late)")
		return nil
	}
	if err != nil {
		return fmt.Errorf("get message %s/%d: %w", adv.Stream, adv.StreamSeq, err)
	}
	reason := fmt.Sprintf("max deliveries reached: consumer %s gave up after %d deliveries, none settled (its handler crashed, hung past its timeout or lost the message)", adv.Consumer, adv.Deliveries)
	if err := b.deadLetter(ctx, adv.Stream, adv.Consumer, adv.StreamSeq, raw.Subject, raw.Header, raw.Data, adv.Deliveries, reason); err != nil {
		return err
	}
	if st.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy {
		if err := st.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("delete moved message %s/%d: %w", adv.Stream, adv.StreamSeq, err)
		}
	}
	b.metrics.moved.Inc()
	log.WarnContext(ctx, "max-delivered message moved to the dead-letter stream", "subject", raw.Subject, "deliveries", adv.Deliveries)
	return nil
}
