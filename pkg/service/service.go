// Package service is the kit every Archivist service's main is wired with:
// configuration from the environment, logging, the admin server, the
// database (migrated at start), the bus, the blob store, and graceful
// shutdown in reverse start order.
//
// A service is a Definition. Its main is one line, service.Main(def), and
// `archivist dev` runs every Definition in one process with Start.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/telemetry"
)

// Definition describes a service.
type Definition struct {
	// Name is the service's name: its binary, NATS connection, producer and
	// log "service" attribute.
	Name string
	// Summary says in a sentence what the service does; logged at start.
	Summary string
	// Schemas are the PostgreSQL schemas the service owns, migrated at start.
	Schemas []store.Schema
	// NeedsDB, NeedsBus and NeedsBlob say which dependencies Run uses.
	NeedsDB, NeedsBus, NeedsBlob bool
	// ObservesBus marks a service that only looks at the bus (stream and
	// consumer state, dead letters): it neither makes nor checks the
	// streams at start (what is missing, it shows), and runs no dead-letter
	// mover (it consumes nothing).
	ObservesBus bool
	// Buckets, if set, returns the key-value buckets the service uses, from
	// the process environment's configuration: `archivist migrate` makes
	// them as the deploy identity, as it makes the streams.
	Buckets func(ctx context.Context) ([]jetstream.KeyValueConfig, error)
	// Run runs the service until ctx ends, then stops its work cleanly
	// (draining consumers) and returns. It calls env.Ready once it serves.
	Run func(ctx context.Context, env *Env) error
	// Config points to a zero value of the configuration Run reads
	// besides Common (Configured's C): its variables are the service's
	// own in the reference (the README's variables by service).
	Config any
}

// Common is the configuration every service reads.
type Common struct {
	// AdminAddr is the admin server's address (/healthz, /readyz, /metrics).
	AdminAddr string `env:"ADMIN_ADDR, default=:9090"`
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT, default=25s"`
	// MigrateOnStart runs the service's migrations at start. Off, the
	// service waits, not ready, until `archivist migrate` has brought its
	// schemas to the version it needs.
	MigrateOnStart bool `env:"MIGRATE_ON_START, default=true"`
	// LeaderRetry is how often a replica asks to lead the loops that run in
	// one replica at a time, and how long a new leader waits before it
	// starts (two retries: the old one's session check); see AsLeader.
	LeaderRetry time.Duration `env:"LEADER_RETRY, default=5s"`
	// RequireRoles makes `archivist migrate` fail when a service's runtime
	// role does not exist, instead of skipping its grants (Kubernetes, where
	// each service logs in as its own role).
	RequireRoles bool `env:"MIGRATE_REQUIRE_ROLES, default=false"`
	// MigrateWait is how long `archivist migrate` keeps trying while
	// PostgreSQL or NATS does not answer yet, or a runtime role is not yet
	// made (a new CloudNativePG cluster takes minutes to start and to create
	// its managed roles); 0: one attempt. A failure of a migration itself
	// ends it at once.
	MigrateWait time.Duration `env:"MIGRATE_WAIT, default=0s"`
	// Bus is how to reach NATS.
	Bus bus.Config
	// Store is how to reach PostgreSQL.
	Store store.Config
	// Blob is which blob store to use.
	Blob blob.Config
	// HTTP bounds every API server of the service.
	HTTP HTTPLimits
	// Auth says how the APIs authenticate their callers.
	Auth httpauth.Config
}

// Env is what a running service is given.
type Env struct {
	// Name of the service.
	Name string
	// Log is the service's logger (with a "service" attribute).
	Log *slog.Logger
	// Bus is the service's NATS connection (nil unless NeedsBus).
	Bus *bus.Bus
	// DB is the service's pool (nil unless NeedsDB).
	DB *pgxpool.Pool
	// Blob is the blob store (nil unless NeedsBlob).
	Blob blob.Store
	// Metrics registers the service's metrics (labelled service=<name>).
	Metrics prometheus.Registerer
	// ShutdownTimeout bounds the service's own clean stop once Run's ctx ends.
	ShutdownTimeout time.Duration
	// LeaderRetry paces AsLeader (LEADER_RETRY).
	LeaderRetry time.Duration
	// HTTP bounds the service's API servers.
	HTTP HTTPLimits
	// Auth says how the service's APIs authenticate their callers.
	Auth httpauth.Config
	// Gate probes the service's dependencies (PostgreSQL, NATS, the blob
	// store): its consumers pause while it is closed, and its daemons ask
	// it before they take work (Gate.Wait) and tell it of failures
	// (Gate.Observe), so that an outage spends no attempt of any work.
	Gate *fault.Gate

	lookuper envconfig.Lookuper
	admin    *Admin
}

// Ready marks the service as started: /readyz succeeds once every service of
// the process is ready.
func (e *Env) Ready() { e.admin.Started(e.Name) }

// LoadConfig fills a service-specific configuration struct from the
// environment and logs it, secrets redacted.
func (e *Env) LoadConfig(ctx context.Context, v any) error {
	if err := config.Load(ctx, v, e.lookuper); err != nil {
		return fmt.Errorf("%s: %w", e.Name, err)
	}
	e.Log.DebugContext(ctx, "configuration", config.LogAttrs(v)...)
	return nil
}

// Deps are the pieces of a process that its services share.
type Deps struct {
	// Log is the process logger.
	Log *slog.Logger
	// Admin is the process's admin server.
	Admin *Admin
	// Blob, if set, is shared instead of opening Common.Blob.
	Blob blob.Store
	// Lookuper reads the environment (nil: the process environment).
	Lookuper envconfig.Lookuper
}

// Running is a started service.
type Running struct {
	def     Definition
	env     *Env
	cancel  context.CancelFunc
	done    chan struct{}
	runErr  error
	closers []closer
}

type closer struct {
	name string
	fn   func(context.Context) error
}

// Start starts a service: opens and migrates its database, opens the blob
// store, connects its bus (whose consumers pause while the database or blob
// store is down) and creates the streams, starts the dead-letter mover, and
// runs def.Run in the background. What it opened is closed, in
// reverse order, by Stop (or here, if a later step fails).
func Start(ctx context.Context, def Definition, common Common, deps Deps) (_ *Running, err error) {
	log := deps.Log.With("service", def.Name)
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"service": def.Name}, deps.Admin.Registry)
	env := &Env{Name: def.Name, Log: log, Metrics: reg, ShutdownTimeout: common.ShutdownTimeout, LeaderRetry: common.LeaderRetry, HTTP: common.HTTP, Auth: common.Auth, lookuper: deps.Lookuper, admin: deps.Admin}
	env.Gate = fault.NewGate(log)
	// What runs, for dashboards and for absent() alerts: a service whose
	// metrics stop arriving is noticed, not read as quiet.
	telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "archivist_build_info",
		Help:        "1, labelled with the build's version and Go version.",
		ConstLabels: prometheus.Labels{"version": Version, "go_version": runtime.Version()}})).Set(1)
	r := &Running{def: def, env: env, done: make(chan struct{})}
	deps.Admin.Starting(def.Name)
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), common.ShutdownTimeout)
			defer cancel()
			r.closeAll(sctx)
		}
	}()

	if def.NeedsDB || len(def.Schemas) > 0 {
		pool, err := store.Open(ctx, common.Store, def.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", def.Name, err)
		}
		env.DB = pool
		if pc := store.NewPoolCollector(pool); reg.Register(pc) == nil {
			r.closers = append(r.closers, closer{"database metrics", func(context.Context) error { reg.Unregister(pc); return nil }})
		}
		r.closers = append(r.closers, closer{"database", func(context.Context) error { pool.Close(); return nil }})
		ping := func(ctx context.Context) error { return store.Ping(ctx, pool) }
		deps.Admin.AddCheck(def.Name+" database", ping)
		env.Gate.Add(fault.Probe{Name: fault.Postgres, Check: ping})
		if common.MigrateOnStart {
			for _, s := range def.Schemas {
				if err := store.Migrate(ctx, pool, s); err != nil {
					return nil, fmt.Errorf("%s: %w", def.Name, err)
				}
				v, _ := store.Version(ctx, pool, s)
				log.InfoContext(ctx, "schema migrated", "schema", s.ID(), "version", v)
			}
		} else if err := awaitSchemas(ctx, pool, def.Schemas, deps.Admin, def.Name, log); err != nil {
			return nil, fmt.Errorf("%s: %w", def.Name, err)
		}
	}
	// The blob store before the bus: the bus's dependency check reads it.
	if def.NeedsBlob {
		env.Blob = deps.Blob
		if env.Blob == nil {
			if env.Blob, err = blob.Open(ctx, common.Blob); err != nil {
				return nil, fmt.Errorf("%s: %w", def.Name, err)
			}
		}
		bs := env.Blob
		env.Gate.Add(fault.Probe{Name: fault.BlobStore, Check: func(ctx context.Context) error { return blob.Check(ctx, bs) }})
	}
	if def.NeedsBus {
		b, err := bus.Connect(ctx, common.Bus, def.Name, bus.WithLogger(log), bus.WithRegisterer(reg),
			bus.WithDependencyCheck(env.Gate.Check))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", def.Name, err)
		}
		r.closers = append(r.closers, closer{"bus", b.Close})
		env.Bus = b
		deps.Admin.AddCheck(def.Name+" nats", func(context.Context) error { return b.Healthy() })
		env.Gate.Add(fault.Probe{Name: fault.NATS, Check: func(context.Context) error { return b.Healthy() }})
		if !def.ObservesBus {
			ensure := b.EnsureStreams
			if !common.Bus.EnsureStreams {
				ensure = b.CheckStreams
			}
			if err := ensure(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", def.Name, err)
			}
			mover, err := b.StartDeadLetterMover(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", def.Name, err)
			}
			r.closers = append(r.closers, closer{"dead-letter mover", mover.Stop})
			registerBacklogs(env, b, events.ConsumersOf(def.Name))
		}
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	log.InfoContext(ctx, "starting", "summary", def.Summary)
	go func() {
		r.runErr = def.Run(runCtx, env)
		close(r.done)
	}()
	return r, nil
}

// registerBacklogs exports the lag of the service's consumers and the
// dead letters waiting, read from JetStream at each scrape.
func registerBacklogs(env *Env, b *bus.Bus, consumers []events.Consumer) {
	labels := []string{"stream", "consumer"}
	env.ReadGauges([]Gauge{
		{Name: "archivist_consumer_pending", Help: "Messages of the consumer's stream not yet delivered to it.", Labels: labels},
		{Name: "archivist_consumer_ack_pending", Help: "Messages delivered to the consumer and not yet acknowledged.", Labels: labels},
		{Name: "archivist_consumer_redelivered", Help: "Messages delivered more than once and not yet acknowledged.", Labels: labels},
		{Name: "archivist_dead_letters", Help: "Messages in the dead-letter stream, waiting for an operator (archivist work find --pipeline bus)."},
	}, func(ctx context.Context) (Readings, error) {
		// A consumer not made (one the service makes only where it is
		// configured: the auditor's second copy) is left out, not an error
		// that would take every other consumer's gauges with it.
		backlogs, dead, err := b.Backlogs(ctx, consumers)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// One at a time, only then: the usual scrape stays one call.
			backlogs = nil
			for _, c := range consumers {
				bl, _, err := b.Backlogs(ctx, []events.Consumer{c})
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					continue
				}
				if err != nil {
					return nil, err
				}
				backlogs = append(backlogs, bl...)
			}
		} else if err != nil {
			return nil, err
		}
		r := Readings{"archivist_dead_letters": {{Value: float64(dead)}}}
		for _, bl := range backlogs {
			l := []string{bl.Consumer.Stream, bl.Consumer.Config.Durable}
			r["archivist_consumer_pending"] = append(r["archivist_consumer_pending"], Reading{l, float64(bl.Pending)})
			r["archivist_consumer_ack_pending"] = append(r["archivist_consumer_ack_pending"], Reading{l, float64(bl.AckPending)})
			r["archivist_consumer_redelivered"] = append(r["archivist_consumer_redelivered"], Reading{l, float64(bl.Redelivered)})
		}
		return r, nil
	})
}

// schemaPoll is how often a service waiting for its schemas looks again.
const schemaPoll = 2 * time.Second

// awaitSchemas waits until every schema is at least at the version this
// build needs (its newest migration): a service that does not migrate
// (MIGRATE_ON_START=false) must not run new code on an old schema. It is
// not ready meanwhile; /readyz says what it waits for. A schema
// newer than the build (a rollback of the code) is logged, and served.
func awaitSchemas(ctx context.Context, pool *pgxpool.Pool, schemas []store.Schema, admin *Admin, name string, log *slog.Logger) error {
	var all []store.Schema
	for _, s := range schemas {
		all = append(all, s.WithParts()...)
	}
	behind := func() (string, error) {
		for _, s := range all {
			want, err := store.Latest(s)
			if err != nil {
				return "", err
			}
			have, err := store.Version(ctx, pool, s)
			if err != nil {
				// Not migrated at all yet, or not granted to this role.
				return fmt.Sprintf("schema %s: %v; this build needs version %d: waiting for archivist migrate", s.ID(), err, want), nil
			}
			if have < want {
				return fmt.Sprintf("schema %s is at version %d, this build needs %d: waiting for archivist migrate", s.ID(), have, want), nil
			}
			if have > want {
				log.WarnContext(ctx, "schema newer than this build (a rolled-back release?)", "schema", s.ID(), "version", have, "build", want)
			}
		}
		return "", nil
	}
	var logged time.Time
	for {
		w, err := behind()
		if err != nil {
			return err
		}
		admin.Waiting(name, w)
		if w == "" {
			return nil
		}
		if time.Since(logged) > time.Minute {
			log.WarnContext(ctx, "not ready: "+w)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", w, ctx.Err())
		case <-time.After(schemaPoll):
		}
	}
}

// Done is closed when Run has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is Run's result, once Done is closed.
func (r *Running) Err() error { return r.runErr }

// Stop cancels Run and waits for it, then closes what Start opened in
// reverse order: dead-letter mover, bus (drained), database.
func (r *Running) Stop(ctx context.Context) error {
	r.env.admin.ShuttingDown()
	r.cancel()
	var errs []error
	select {
	case <-r.done:
		if err := r.runErr; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s: %w", r.def.Name, err))
		}
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("%s did not stop in time: %w", r.def.Name, ctx.Err()))
	}
	errs = append(errs, r.closeAll(ctx))
	r.env.Log.InfoContext(ctx, "stopped")
	return errors.Join(errs...)
}

func (r *Running) closeAll(ctx context.Context) error {
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		c := r.closers[i]
		if err := c.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: close %s: %w", r.def.Name, c.name, err))
		}
	}
	r.closers = nil
	return errors.Join(errs...)
}

// Configured adapts a run function that takes its configuration: the
// configuration struct C is loaded from the environment (and logged,
// secrets redacted) before run is called.
func Configured[C any](run func(ctx context.Context, env *Env, cfg C) error) func(context.Context, *Env) error {
	return func(ctx context.Context, env *Env) error {
		var cfg C
		if err := env.LoadConfig(ctx, &cfg); err != nil {
			return err
		}
		return run(ctx, env, cfg)
	}
}
