package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/telemetry"
)

// Message is one decoded event handed to a Handler.
type Message[T any] struct {
	// Envelope is the decoded envelope; its payload is Event.
	Envelope events.Envelope
	// Event is the decoded, validated payload.
	Event *T
	// Subject the message was published on.
	Subject string
	// Header holds the message's NATS headers.
	Header nats.Header
	// Metadata is JetStream's delivery metadata (stream sequence, number of
	// deliveries so far, ...).
	Metadata *jetstream.MsgMetadata
}

// Handler handles one message. Returning nil acks it. Returning an error
// naks it with a delay that grows with each delivery, until the consumer's
// MaxDeliver moves it to the dead-letter stream; an error wrapped with
// fault.Permanent dead-letters it at once. Handlers must be idempotent: JetStream
// delivers at least once.
type Handler[T any] func(ctx context.Context, m *Message[T]) error

// RawHandler handles one undecoded JetStream message; its errors are treated
// as a Handler's.
type RawHandler func(ctx context.Context, m jetstream.Msg) error

// ConsumeOption configures a consume loop.
type ConsumeOption func(*consumeOptions)

type consumeOptions struct {
	concurrency int
	retryBase   time.Duration
	retryMax    time.Duration
	pullMax     int
	oneAtATime  bool
	manual      bool
	timeout     time.Duration
	stall       bool // timeout bounds a stall (no Progress), not the whole handling
	rejections  func(subject string) (string, bool)
}

// WithRejections tells a message's publisher when its message is
// dead-lettered: an events.Rejected (its id, subject, stream sequence and
// the reason) is published on the subject rejectTo names for the message's
// subject (none when it answers false). The subject must be one the
// publisher may read and no one else: the curator sends each source's
// rejections to events.RejectedSubject(source), the source its message's
// subject names. Best effort: the dead letter is the record, so a
// rejection that cannot be published is logged, not retried.
func WithRejections(rejectTo func(subject string) (string, bool)) ConsumeOption {
	return func(o *consumeOptions) { o.rejections = rejectTo }
}

// DefaultHandlerTimeout bounds how long a handler may hold a message.
const DefaultHandlerTimeout = 15 * time.Minute

// WithHandlerTimeout bounds how long one message may be handled (default
// DefaultHandlerTimeout): the handler's context ends then, and the message
// is no longer kept in progress, so a handler that hangs regardless lets
// JetStream redeliver it after the ack wait, and that delivery counts
// towards MaxDeliver like a failure.
func WithHandlerTimeout(d time.Duration) ConsumeOption {
	return func(o *consumeOptions) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithStallTimeout bounds how long a handler may go without reporting
// progress (Progress) instead of how long it may hold a message: a handler
// that reports progress (bytes read, say) is kept in progress for as long
// as it needs; one that stalls for d has its context ended, as at a
// handler timeout. For work whose length grows with its input (an audit
// read of a 100 GiB object).
func WithStallTimeout(d time.Duration) ConsumeOption {
	return func(o *consumeOptions) {
		if d > 0 {
			o.timeout, o.stall = d, true
		}
	}
}

type progressKey struct{}

// Progress tells the consume loop that the handler whose context ctx is
// is making progress: under WithStallTimeout its message is kept in
// progress, and its context alive, for another stall timeout. Elsewhere it
// does nothing. It is cheap enough to call on every read.
func Progress(ctx context.Context) {
	if e, ok := ctx.Value(progressKey{}).(*inflightEntry); ok && e.stall > 0 {
		e.until.Store(time.Now().Add(e.stall).UnixNano())
	}
}

// WithManualFetch starts no consumption: the caller fetches from
// Subscription.Consumer and hands each message to Subscription.Process,
// which decodes, handles and settles it as the consume loop would, with its
// deadline kept extended meanwhile. For a worker manager with priorities.
func WithManualFetch() ConsumeOption {
	return func(o *consumeOptions) { o.manual = true }
}

// retryAfter asks for redelivery after a given delay.
type retryAfter struct{ d time.Duration }

func (r retryAfter) Error() string { return fmt.Sprintf("retry after %s", r.d) }

// IsRetryAfter reports whether err is a RetryAfter result.
func IsRetryAfter(err error) bool {
	var ra retryAfter
	return errors.As(err, &ra)
}

// RetryAfter is a handler result that naks the message for redelivery after
// d: a planned retry ("not yet"), not a failure.
func RetryAfter(d time.Duration) error { return retryAfter{d} }

// RetryDelay is the delay of a RetryAfter result (false for another error).
func RetryDelay(err error) (time.Duration, bool) {
	var ra retryAfter
	if errors.As(err, &ra) {
		return ra.d, true
	}
	return 0, false
}

// WithOneAtATime fetches a message only when the previous one is settled,
// and holds none in a buffer: for long work items (a researcher's), so that
// an idle worker elsewhere can take what this one has not started.
func WithOneAtATime() ConsumeOption {
	return func(o *consumeOptions) { o.oneAtATime, o.concurrency = true, 1 }
}

// WithConcurrency sets how many messages are handled at once (default 1).
func WithConcurrency(n int) ConsumeOption {
	return func(o *consumeOptions) { o.concurrency = max(n, 1) }
}

// WithRetryDelay sets the delay before redelivery after a handler error: base
// after the first delivery, doubling with each further one, at most max
// (defaults 1 s and 2 min).
func WithRetryDelay(base, max time.Duration) ConsumeOption {
	return func(o *consumeOptions) { o.retryBase, o.retryMax = base, max }
}

// WithPullMaxMessages sets how many messages the client buffers ahead of the
// handlers (default: 16 per handler, at least 64). A crashed worker costs
// a delivery to every message its client held: 500 ahead of the handlers
// had a worker killed a few times during a backlog dead-letter messages
// it never handled; 64 keep the throughput (BenchmarkPublishConsumeAck)
// and cost a crash little.
func WithPullMaxMessages(n int) ConsumeOption {
	return func(o *consumeOptions) { o.pullMax = n }
}

// Subscription is a running consume loop.
type Subscription struct {
	b       *Bus
	name    string
	stream  string
	log     *slog.Logger
	opts    consumeOptions
	handle  RawHandler
	ackWait time.Duration
	// maxDeliver is the consumer's MaxDeliver (0 or less: unbounded): a
	// failure on that delivery dead-letters the message with its error.
	maxDeliver int
	cc         jetstream.ConsumeContext
	work       chan queued
	workers    sync.WaitGroup
	hctx       context.Context
	hcancel    context.CancelFunc
	inflight   inflight
	hbDone     chan struct{}
	// fetchStop and fetchDone run the one-at-a-time fetch loop.
	fetchStop context.CancelFunc
	fetchDone chan struct{}
	cons      jetstream.Consumer
	stopOnce  sync.Once
	stopErr   error

	// Pausing while a dependency is down (Bus.depCheck). pmu guards cc,
	// paused, resumed and stopping.
	pmu      sync.Mutex
	paused   bool
	resumed  chan struct{} // closed when a pause ends
	pausing  chan struct{} // closed when a pause begins
	stopping bool
	callback func(jetstream.Msg)
	// held are messages the client had buffered when a pause began,
	// handed over by the drain: kept in progress, handled after the pause.
	held []queued
	// feeding counts the goroutines handing held messages to the workers.
	feeding sync.WaitGroup
	// drained are the consume contexts drained by pauses: Stop waits
	// until they have handed over their last message.
	drained []jetstream.ConsumeContext

	// Metric children resolved once, not per message.
	acked, retried, deadLettered, paused0 prometheus.Counter
	handleTime                            prometheus.Observer
}

// decodeError marks a message that is not a valid event.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }
func (e decodeError) Unwrap() error { return e.err }

// Consume starts a typed consume loop on consumer c (created or updated
// first): every message is decoded as an envelope carrying a T, validated,
// and handed to h. A message that does not decode or validate is
// dead-lettered with the reason and terminated. Stop the loop with
// Subscription.Stop.
func Consume[T any, PT interface {
	*T
	events.Event
}](ctx context.Context, b *Bus, c events.Consumer, h Handler[T], opts ...ConsumeOption) (*Subscription, error) {
	spanName, spanKind := "process "+c.Config.Durable, trace.WithSpanKind(trace.SpanKindConsumer)
	return b.ConsumeRaw(ctx, c, func(ctx context.Context, msg jetstream.Msg) error {
		env, err := events.Unmarshal(msg.Data())
		if err != nil {
			return decodeError{fmt.Errorf("undecodable message: %w", err)}
		}
		ev, err := events.Decode[T, PT](env)
		if err != nil {
			return decodeError{fmt.Errorf("invalid %s event %s: %w", env.Type, env.ID, err)}
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("message metadata: %w", err)
		}
		msgOf := &Message[T]{Envelope: env, Event: ev, Subject: msg.Subject(), Header: msg.Headers(), Metadata: meta}
		if !telemetry.Tracing() && !telemetry.Carried(msg.Headers()) {
			return h(ctx, msgOf) // no trace to record or pass on
		}
		// The handler runs in the trace the message carries: what it
		// publishes and queries follows it.
		ctx, span := tracer.Start(telemetry.Extract(ctx, msg.Headers()), spanName, spanKind)
		defer span.End()
		if span.IsRecording() { // attributes cost only where spans are kept
			span.SetAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", msg.Subject()),
				attribute.String("messaging.consumer.group.name", c.Config.Durable), attribute.String("messaging.message.id", env.ID),
				attribute.Int64("messaging.nats.delivered", int64(meta.NumDelivered)))
		}
		err = h(ctx, msgOf)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}, opts...)
}

// ConsumeRaw starts a consume loop of undecoded messages on consumer c.
func (b *Bus) ConsumeRaw(ctx context.Context, c events.Consumer, h RawHandler, opts ...ConsumeOption) (*Subscription, error) {
	o := consumeOptions{concurrency: 1, retryBase: time.Second, retryMax: 2 * time.Minute, timeout: DefaultHandlerTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.pullMax <= 0 {
		o.pullMax = max(64, 16*o.concurrency)
	}
	cons, err := b.EnsureConsumer(ctx, c)
	if err != nil {
		return nil, err
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	s := &Subscription{
		b:       b,
		name:    c.Config.Durable,
		stream:  c.Stream,
		log:     b.log.With("consumer", c.Config.Durable, "stream", c.Stream),
		opts:    o,
		handle:  h,
		ackWait: ackWait,
		hbDone:  make(chan struct{}),

		maxDeliver: cons.CachedInfo().Config.MaxDeliver,
		pausing:    make(chan struct{}),
	}
	s.inflight.m = make(map[*inflightEntry]struct{})
	s.acked = b.metrics.messages.WithLabelValues(s.name, outcomeAcked)
	s.retried = b.metrics.messages.WithLabelValues(s.name, outcomeRetried)
	s.deadLettered = b.metrics.messages.WithLabelValues(s.name, outcomeDeadLettered)
	s.paused0 = b.metrics.pauses.WithLabelValues(s.name)
	s.handleTime = b.metrics.handle.WithLabelValues(s.name)
	s.hctx, s.hcancel = context.WithCancel(context.WithoutCancel(ctx))

	callback := s.process
	if !o.manual && !o.oneAtATime {
		s.work = make(chan queued, o.concurrency)
		for range o.concurrency {
			s.workers.Add(1)
			go func() {
				defer s.workers.Done()
				for q := range s.work {
					s.handleQueued(q.msg, q.e)
				}
			}()
		}
		// A message is in flight (kept in progress) from the moment it is
		// handed over, so one waiting for a worker is not redelivered. One
		// handed over during a pause (the client's buffer, drained when
		// the pause began) is held, kept in progress, until it ends.
		callback = func(m jetstream.Msg) {
			q := queued{m, s.track(m)}
			for {
				s.pmu.Lock()
				if s.paused {
					s.held = append(s.held, q)
					s.pmu.Unlock()
					return
				}
				pausing := s.pausing
				s.pmu.Unlock()
				select {
				case s.work <- q:
					return
				case <-pausing: // every worker waits: held instead, so the drain goes on
				}
			}
		}
	}
	s.cons = cons
	s.callback = callback
	go s.heartbeat()
	if o.manual {
		return s, nil
	}
	if o.oneAtATime {
		s.startFetchLoop(cons)
		s.log.DebugContext(ctx, "consuming one at a time", "ack_wait", ackWait)
		return s, nil
	}
	s.cc, err = s.consume()
	if err != nil {
		s.hcancel()
		if s.work != nil {
			close(s.work)
		}
		close(s.hbDone)
		return nil, fmt.Errorf("consume %s: %w", c.Config.Durable, err)
	}
	s.log.DebugContext(ctx, "consuming", "ack_wait", ackWait, "concurrency", o.concurrency)
	return s, nil
}

// consume starts (or restarts, after a pause) the push-style consumption.
func (s *Subscription) consume() (jetstream.ConsumeContext, error) {
	return s.cons.Consume(s.callback,
		jetstream.PullMaxMessages(s.opts.pullMax),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) || s.b.nc.IsConnected() {
				s.log.Warn("consume error", "err", err)
			}
		}))
}
