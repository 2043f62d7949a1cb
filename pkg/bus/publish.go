package bus

import (
	"context"
	"fmt"

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
	ctx, span := publishSpan(ctx, "publish "+subject, attribute.String("messaging.destination.name", subject),
		attribute.String("messaging.message.id", env.ID))
	defer span.End()
	telemetry.Inject(ctx, m.Header)
	ack, err := b.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("publish %s %s on %s: %w", env.Type, env.ID, subject, err)
	}
	return ack, nil
}

// tracer makes the bus's spans.
var tracer = otel.Tracer("github.com/archivist/archivist/pkg/bus")

// publishSpan starts a producer span, whose context the messages carry.
func publishSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(append(attrs, attribute.String("messaging.system", "nats"))...))
}

// PublishEvent wraps e in a new envelope from this bus's producer and
// publishes it on its registered subject.
func (b *Bus) PublishEvent(ctx context.Context, e events.Event, opts ...jetstream.PublishOpt) (events.Envelope, *jetstream.PubAck, error) {
	k, ok := events.Lookup(e.EventType())
	if !ok {
		return events.Envelope{}, nil, fmt.Errorf("publish: event type %q is not registered", e.EventType())
	}
	env, err := events.New(b.producer, e)
	if err != nil {
		return events.Envelope{}, nil, err
	}
	ack, err := b.Publish(ctx, k.Subject, env, opts...)
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
	ctx, span := publishSpan(ctx, "publish batch", attribute.Int("messaging.batch.message_count", len(batch)))
	defer span.End()
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, o := range batch {
		m, err := NewMsg(o.Subject, o.Envelope)
		if err != nil {
			return err
		}
		telemetry.Inject(ctx, m.Header)
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
