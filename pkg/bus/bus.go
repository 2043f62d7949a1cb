// Package bus is Archivist's event bus on NATS JetStream: connecting,
// creating streams and consumers, publishing events with de-duplication, and
// a typed consume loop with redelivery, deadline extension and dead letters.
//
// Everything that is "in flight", "redeliver", "extend the deadline" and
// "dead letter" is JetStream's own ack wait, nak with delay, in-progress and
// max-deliver; the package only wires them together the same way for every
// service.
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/config"
)

// Config says how to reach NATS. Its fields are read from the environment by
// the service kit.
type Config struct {
	// URL is the NATS server URL (a comma-separated list for a cluster).
	URL string `env:"NATS_URL, default=nats://127.0.0.1:4222"`
	// CredsFile is a NATS credentials file (JWT and nkey seed).
	CredsFile string `env:"NATS_CREDS_FILE"`
	// User and Password authenticate as one of the users of the server's
	// authorization block (one per service: charts/archivist-nats/files/auth.conf).
	User string `env:"NATS_USER"`
	// Password is User's password.
	Password string `env:"NATS_PASSWORD"`
	// TLSCAFile is a PEM file of CAs to trust for the server's certificate.
	TLSCAFile string `env:"NATS_TLS_CA_FILE"`
	// TLSCertFile and TLSKeyFile are a client certificate for mutual TLS.
	TLSCertFile string `env:"NATS_TLS_CERT_FILE"`
	// TLSKeyFile is the client certificate's private key.
	TLSKeyFile string `env:"NATS_TLS_KEY_FILE"`
	// Replicas is the number of replicas of every stream (3 in a cluster).
	Replicas int `env:"NATS_REPLICAS, default=1"`
	// EnsureStreams has a service create or update the streams at start;
	// off, it only checks they exist, and the deploy identity (`archivist
	// migrate` as NATS user deploy) manages them: services' users may not.
	EnsureStreams bool `env:"NATS_ENSURE_STREAMS, default=true"`
}

// Bus is a connection to NATS JetStream on behalf of one service.
type Bus struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	producer string
	replicas int
	// manages says whether this identity creates and updates the streams
	// and buckets (NATS_ENSURE_STREAMS), or only binds to them.
	manages bool
	log     *slog.Logger
	metrics *metrics
	// depCheck tells whether the service's dependencies (PostgreSQL, the
	// blob store) answer; consumers pause while it fails.
	depCheck func(context.Context) error
}

// Option configures Connect.
type Option func(*connectOptions)

type connectOptions struct {
	logger   *slog.Logger
	reg      prometheus.Registerer
	depCheck func(context.Context) error
}

// WithDependencyCheck sets how consumers tell that a dependency of their
// handlers (PostgreSQL, the blob store) is down: when a handler fails and
// check fails too, the consumer pauses (takes no more messages; the ones in
// hand wait, kept in progress) and probes check every second; when it
// passes, the waiting messages are handled again and consuming resumes. An
// outage then spends no deliveries of the messages in hand, instead of
// dead-lettering them after MaxDeliver quick retries.
func WithDependencyCheck(check func(context.Context) error) Option {
	return func(o *connectOptions) { o.depCheck = check }
}

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *connectOptions) { o.logger = l } }

// WithRegisterer registers the bus metrics with r.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *connectOptions) { o.reg = r } }

// Connect connects to NATS as producer (the service's name, which is also
// the connection name and the producer of every event it publishes). It
// reconnects forever after a lost connection.
func Connect(ctx context.Context, cfg Config, producer string, opts ...Option) (*Bus, error) {
	o := connectOptions{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	log := o.logger.With("component", "bus")
	nopts := []nats.Option{
		nats.Name(producer),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.RetryOnFailedConnect(false),
		// The connection's callbacks outlive ctx and belong to no piece of
		// work: logged without a context.
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			log.Error("nats async error", "subject", subj, "err", err)
		}),
	}
	if cfg.CredsFile != "" {
		nopts = append(nopts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.User != "" {
		// A user's replies come to an inbox prefix of its own, which no
		// other user may read (events.PermissionsOf).
		nopts = append(nopts, nats.UserInfo(cfg.User, cfg.Password), nats.CustomInboxPrefix(events.InboxPrefix(cfg.User)))
	}
	if cfg.TLSCAFile != "" {
		nopts = append(nopts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		nopts = append(nopts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}

	nc, err := nats.Connect(cfg.URL, nopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", config.RedactSecrets(cfg.URL), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	b := &Bus{nc: nc, js: js, producer: producer, replicas: max(cfg.Replicas, 1), manages: cfg.EnsureStreams, log: log, metrics: newMetrics(o.reg), depCheck: o.depCheck}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream not available at %s: %w", config.RedactSecrets(cfg.URL), err)
	}
	return b, nil
}

// Conn is the underlying NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// JetStream is the underlying JetStream context.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Log is the bus's logger.
func (b *Bus) Log() *slog.Logger { return b.log }

// Producer is the name this bus publishes events as.
func (b *Bus) Producer() string { return b.producer }

// EnsureStreams creates or updates every stream of events.Streams, and the
// consumers whose interest keeps an interest stream's events
// (events.InterestConsumers). It is idempotent: replicas of every service
// call it at start.
func (b *Bus) EnsureStreams(ctx context.Context) error {
	// The interest consumers first where their stream exists already: a
	// stream switched to interest retention (CURATION, from limits) with
	// no consumer drops every message it holds.
	var later []events.Consumer // of a stream not made yet
	for _, c := range events.InterestConsumers {
		if _, err := b.EnsureConsumer(ctx, c); errors.Is(err, jetstream.ErrStreamNotFound) {
			later = append(later, c)
		} else if err != nil {
			return err
		}
	}
	for _, cfg := range events.Streams(b.replicas) {
		if _, err := b.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("create or update stream %s: %w", cfg.Name, err)
		}
	}
	for _, c := range later {
		if _, err := b.EnsureConsumer(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// CheckStreams reports a stream of events.Streams that does not exist, for a
// service that may not create streams (NATS_ENSURE_STREAMS=false).
func (b *Bus) CheckStreams(ctx context.Context) error {
	for _, cfg := range events.Streams(b.replicas) {
		if _, err := b.js.Stream(ctx, cfg.Name); err != nil {
			return fmt.Errorf("stream %s: %w (the deploy identity makes the streams: archivist migrate with NATS_USER=deploy)", cfg.Name, err)
		}
	}
	return nil
}

// EnsureKeyValue creates or updates a key-value bucket (with the bus's
// replicas unless cfg sets them): the deploy identity's part, as
// EnsureStreams is for streams.
func (b *Bus) EnsureKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = b.replicas
	}
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create or update bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// KeyValue opens the bucket cfg describes. A bus that manages the streams
// (NATS_ENSURE_STREAMS) creates or updates it; otherwise it binds to the
// bucket the deploy identity made, and refuses one whose TTL differs from
// cfg's (the service's configuration and the deployed bucket disagree).
func (b *Bus) KeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if b.manages {
		return b.EnsureKeyValue(ctx, cfg)
	}
	kv, err := b.js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w (the deploy identity makes it: archivist migrate with NATS_USER=deploy)", cfg.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	if st.TTL() != cfg.TTL {
		return nil, fmt.Errorf("bucket %s keeps keys %s, this service's configuration says %s: run archivist migrate with the same configuration",
			cfg.Bucket, st.TTL(), cfg.TTL)
	}
	return kv, nil
}

// EnsureConsumer creates or updates a durable consumer.
func (b *Bus) EnsureConsumer(ctx context.Context, c events.Consumer) (jetstream.Consumer, error) {
	cfg := c.Config
	if cfg.Replicas == 0 {
		cfg.Replicas = b.replicas
	}
	cons, err := b.js.CreateOrUpdateConsumer(ctx, c.Stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create or update consumer %s on %s: %w", cfg.Durable, c.Stream, err)
	}
	return cons, nil
}

// Backlog is a consumer's backlog, as JetStream counts it.
type Backlog struct {
	Consumer events.Consumer
	// Pending messages not yet delivered; AckPending delivered and not yet
	// acknowledged; Redelivered delivered more than once and not yet
	// acknowledged.
	Pending, AckPending, Redelivered uint64
}

// Backlogs reads the backlog of each consumer, and how many messages the
// dead-letter stream holds.
func (b *Bus) Backlogs(ctx context.Context, consumers []events.Consumer) ([]Backlog, uint64, error) {
	out := make([]Backlog, 0, len(consumers))
	for _, c := range consumers {
		cons, err := b.js.Consumer(ctx, c.Stream, c.Config.Durable)
		if err != nil {
			return nil, 0, fmt.Errorf("consumer %s on %s: %w", c.Config.Durable, c.Stream, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("consumer %s on %s: %w", c.Config.Durable, c.Stream, err)
		}
		out = append(out, Backlog{Consumer: c, Pending: info.NumPending, AckPending: uint64(info.NumAckPending), Redelivered: uint64(info.NumRedelivered)})
	}
	st, err := b.js.Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", events.StreamDeadLetter, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", events.StreamDeadLetter, err)
	}
	return out, info.State.Msgs, nil
}

// Close drains the connection: subscriptions stop taking messages, pending
// publishes are flushed, then the connection closes. It waits until the
// drain is complete or ctx is done.
func (b *Bus) Close(ctx context.Context) error {
	if b.nc.IsClosed() {
		return nil
	}
	closed := make(chan struct{})
	b.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := b.nc.Drain(); err != nil {
		b.nc.Close()
		return fmt.Errorf("drain nats connection: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		b.nc.Close()
		return fmt.Errorf("drain nats connection: %w", ctx.Err())
	}
}

// CheckDependencies runs the dependency check given to Connect
// (WithDependencyCheck), nil when there is none. A handler that turns its
// failures into a retry schedule of its own (bus.RetryAfter, or fault.Permanent
// after N) asks it first: while a dependency is down it returns the failure
// as it is, so that the subscription pauses and handles the message again
// when the dependency is back, spending no delivery.
func (b *Bus) CheckDependencies(ctx context.Context) error {
	if b.depCheck == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return b.depCheck(cctx)
}

// Healthy reports whether the connection is up.
func (b *Bus) Healthy() error {
	if s := b.nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("nats connection is %s", s)
	}
	return nil
}
