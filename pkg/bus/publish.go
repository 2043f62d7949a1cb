package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/telemetry"
)

// NewMsg builds the NATS message of an envelope: its msgpack bytes, the event
// id as JetStream message id, and the type and producer as headers.
func NewMsg(subject string, env events.Envelope) (*nats.Msg, error) {
	data, err := env.Marshal()
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(events.HeaderMsgID, env.ID)
	m.Header.Set(events.HeaderType, env.Type)
	m.Header.Set(events.HeaderProducer, env.Producer)
	return m, nil
}

// Publish publishes an envelope on subject and waits for JetStream's ack.
// The envelope's id is the message id, so publishing the same envelope again
// within the stream's duplicate window stores it once (ack.Duplicate is then
// true). Extra options (a message TTL, say) go to JetStream.
func (b *Bus) Publish(ctx context.Context, subject string, env events.Envelope, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	m, err := NewMsg(subject, env)
	if err != nil {
		return nil, err
	}
	span := trace.SpanFromContext(ctx)
	if traced(ctx) {
		ctx, span = publishSpan(ctx, "publish "+subject)
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(attribute.String("messaging.destination.name", subject), attribute.String("messaging.message.id", env.ID))
		}
		telemetry.Inject(ctx, m.Header)
	}
	ack, err := b.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("publish %s %s on %s: %w", env.Type, env.ID, subject, err)
	}
	return ack, nil
}

// tracer makes the bus's spans.
var tracer = otel.Tracer("github.com/archivist/archivist/pkg/bus")

// traced tells whether a publish in ctx is traced: this process records
// spans, or ctx carries a trace to pass on.
func traced(ctx context.Context) bool {
	return telemetry.Tracing() || trace.SpanContextFromContext(ctx).IsValid()
}

// producerKind is the span kind of publishing.
var producerKind = trace.WithSpanKind(trace.SpanKindProducer)

// publishSpan starts a producer span, whose context the messages carry;
// its attributes are set only when it is recorded.
func publishSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	ctx, span := tracer.Start(ctx, name, producerKind)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.system", "nats"))
	}
	return ctx, span
}

// PublishEvent wraps e in a new envelope from this bus's producer and
// publishes it on its subject (events.SubjectOf).
func (b *Bus) PublishEvent(ctx context.Context, e events.Event, opts ...jetstream.PublishOpt) (events.Envelope, *jetstream.PubAck, error) {
	subject, err := events.SubjectOf(b.producer, e)
	if err != nil {
		return events.Envelope{}, nil, fmt.Errorf("publish: %w", err)
	}
	env, err := events.New(b.producer, e)
	if err != nil {
		return events.Envelope{}, nil, err
	}
	ack, err := b.Publish(ctx, subject, env, opts...)
	return env, ack, err
}

// Outgoing is one envelope to publish in a batch.
type Outgoing struct {
	// Subject to publish on.
	Subject string
	// Envelope to publish.
	Envelope events.Envelope
}

// PublishBatch publishes many envelopes without waiting for each ack in
// turn, then waits for all of them. It returns the first error; envelopes
// that were stored stay stored, and since each carries its id a retry of the
// whole batch stores nothing twice.
func (b *Bus) PublishBatch(ctx context.Context, batch []Outgoing) error {
	tracing := traced(ctx)
	if tracing {
		var span trace.Span
		ctx, span = publishSpan(ctx, "publish batch")
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("messaging.batch.message_count", len(batch)))
		}
	}
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, o := range batch {
		m, err := NewMsg(o.Subject, o.Envelope)
		if err != nil {
			return err
		}
		if tracing {
			telemetry.Inject(ctx, m.Header)
		}
		f, err := b.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("publish %s %s on %s: %w", o.Envelope.Type, o.Envelope.ID, o.Subject, err)
		}
		futures = append(futures, f)
	}
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if first == nil {
				first = fmt.Errorf("publish %s: %w", f.Msg().Header.Get(events.HeaderMsgID), err)
			}
		case <-ctx.Done():
			return fmt.Errorf("publish batch: %w", ctx.Err())
		}
	}
	return first
}

// PublishNewest publishes each envelope on its subject of stream (a stream
// that keeps one message per subject) unless the subject's last message
// was sent at the same time or later: an envelope's SentAt is its version.
// Each publish is a compare-and-set on the subject's last sequence
// (Nats-Expected-Last-Subject-Sequence), tried again when another publisher
// got there first, so a slower publisher of an older version (a resync
// that read before a merge, a merger replica behind another) never
// replaces a newer message that a consumer may not have read yet. With
// resend, an envelope of the version the subject already holds is
// published again (a resync delivering every version once more); only a
// newer one is kept back. It returns how many it published.
func (b *Bus) PublishNewest(ctx context.Context, stream string, batch []Outgoing, resend bool) (int, error) {
	str, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	var published atomic.Int64
	work := make(chan Outgoing)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(8, len(batch)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				ok, err := b.publishIfNewer(ctx, str, o, resend)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				if ok {
					published.Add(1)
				}
			}
		}()
	}
	for _, o := range batch {
		select {
		case work <- o:
		case err := <-errs:
			close(work)
			wg.Wait()
			return int(published.Load()), err
		case <-ctx.Done():
			close(work)
			wg.Wait()
			return int(published.Load()), ctx.Err()
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return int(published.Load()), err
	default:
		return int(published.Load()), nil
	}
}

// publishIfNewer publishes o unless its subject holds a newer message (or,
// without resend, one as new); false when it did not publish.
func (b *Bus) publishIfNewer(ctx context.Context, str jetstream.Stream, o Outgoing, resend bool) (bool, error) {
	for attempt := 0; ; attempt++ {
		var last uint64
		raw, err := str.GetLastMsgForSubject(ctx, o.Subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return false, fmt.Errorf("last message on %s: %w", o.Subject, err)
		default:
			last = raw.Sequence
			if have, err := events.Unmarshal(raw.Data); err == nil &&
				(have.SentAt.After(o.Envelope.SentAt) || !resend && have.SentAt.Equal(o.Envelope.SentAt)) {
				return false, nil // the stream has a newer version (or this one)
			}
		}
		_, err = b.Publish(ctx, o.Subject, o.Envelope, jetstream.WithExpectLastSequencePerSubject(last))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) && attempt < 10 {
			continue // another publisher came first: compare again
		}
		if err != nil {
			return false, err
		}
		return true, nil
	}
}

// IsFull reports whether err is a stream refusing a message because its
// subject already holds its bound of messages waiting (CURATION: a
// source's events not yet taken by the curator). The publisher should
// slow down and send it again; nothing it sent before was lost.
func IsFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStoreFailed &&
		strings.Contains(apiErr.Description, "maximum messages per subject")
}

// jsErrStoreFailed is JetStream's "storing a message failed"
// (JSStreamStoreFailedF), the code of a subject's bound reached.
const jsErrStoreFailed jetstream.ErrorCode = 10077
