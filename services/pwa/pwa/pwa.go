// Package pwa is the pending-work archivist (tbtl-work-assignment.txt): it
// keeps its copy of the merged episodes and clips, and whenever it activates
// (on a timer, when works change, when a researcher arrives or finishes, when
// a lease ends) it frees expired leases, runs the capacity check, and leases
// work to the pending-work queue, one item per passing check.
package pwa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/pkg/work"
)

// Config is the pwa's own configuration.
type Config struct {
	// Research is shared with the cwa and researchers.
	Research research.Config
	// HTTPAddr serves the research status.
	HTTPAddr string `env:"PWA_HTTP_ADDR, default=:8081"`
	// Interval is the longest the pwa waits between activations.
	Interval time.Duration `env:"PWA_INTERVAL, default=5s"`
	// RecountInterval is how often every episode's counters are recomputed.
	RecountInterval time.Duration `env:"PWA_RECOUNT_INTERVAL, default=10m"`
	// PrintRetention is how long researchers keep the prints of audio no
	// lease names (0: for ever): then the pwa retires them
	// (research.media.retired, reason unused), and a later lease has
	// them made again.
	PrintRetention time.Duration `env:"PWA_PRINT_RETENTION, default=2160h"`
	// PrintCheckInterval is how often the pwa looks for such audio.
	PrintCheckInterval time.Duration `env:"PWA_PRINT_CHECK_INTERVAL, default=1h"`
}

// Definition is the pwa service.
func Definition() service.Definition {
	return service.Definition{
		Name:     "pwa",
		Summary:  "leases an episode and up to N clips to researchers through a pending-work queue whose items expire before their lease",
		Schemas:  []store.Schema{migrations.Schema},
		NeedsDB:  true,
		NeedsBus: true,
		Buckets:  research.Buckets,
		Run:      service.Configured(run),
		Config:   new(Config),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	p, err := New(ctx, env.Bus, research.New(env.DB, research.WithConfig(cfg.Research)), cfg, env.Metrics, env.Log)
	if err != nil {
		return err
	}
	p.gate = env.Gate
	works, err := bus.Consume(ctx, env.Bus, events.PWAWorks, p.Work, bus.WithConcurrency(4))
	if err != nil {
		return err
	}
	recorded, err := bus.Consume(ctx, env.Bus, events.PWARecorded, p.Recorded, bus.WithConcurrency(4))
	if err != nil {
		return errors.Join(err, works.Stop(context.Background()))
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), env.ShutdownTimeout)
		defer cancel()
		_ = recorded.Stop(sctx)
	}()
	p.exportBacklog(env)
	wake, err := env.Bus.Conn().Subscribe(events.SubjectPWAWake, func(*nats.Msg) { p.Wake() })
	if err != nil {
		return errors.Join(fmt.Errorf("subscribe %s: %w", events.SubjectPWAWake, err), works.Stop(context.Background()))
	}
	// The loop stops when the API does (also when it fails to start).
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); p.Loop(lctx) }()

	err = env.ServeHTTP(ctx, cfg.HTTPAddr, p.Handler(), func(addr string) {
		env.Log.InfoContext(ctx, "research status API listening", "addr", addr)
		env.Ready()
	})
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), env.ShutdownTimeout)
	defer cancel()
	<-loopDone
	return errors.Join(err, wake.Unsubscribe(), works.Stop(sctx))
}

// PWA is the pending-work archivist.
type PWA struct {
	bus    *bus.Bus
	store  *research.Store
	cfg    Config
	kv     jetstream.KeyValue
	log    *slog.Logger
	wake   chan struct{}
	leased prometheus.Counter
	// gate pauses the loop while a dependency is down (nil: never).
	gate *fault.Gate

	openMu sync.Mutex
	open   float64   // the last reading of OpenResearch
	openAt time.Time // when it was read
}

// New checks the configuration (a work item must expire before its lease)
// and prepares the researchers bucket and queue consumer it counts.
func New(ctx context.Context, b *bus.Bus, s *research.Store, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*PWA, error) {
	if err := cfg.Research.Check(); err != nil {
		return nil, err
	}
	kv, err := research.Researchers(ctx, b, cfg.Research)
	if err != nil {
		return nil, err
	}
	if _, err := b.EnsureConsumer(ctx, events.Researchers); err != nil {
		return nil, err
	}
	p := &PWA{bus: b, store: s, cfg: cfg, kv: kv, log: log, wake: make(chan struct{}, 1),
		leased: prometheus.NewCounter(prometheus.CounterOpts{Name: "archivist_pwa_work_items_total", Help: "Work items leased and queued."})}
	if reg != nil {
		reg.MustRegister(p.leased, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: events.MetricOpenResearch,
			Help: "Episodes waiting for research or being researched (the researchers scale on it)."}, p.OpenResearch))
	}
	return p, nil
}

// exportBacklog exports the research backlog: episodes by state, active
// leases and live researchers, read when Prometheus scrapes.
func (p *PWA) exportBacklog(env *service.Env) {
	env.ReadGauges([]service.Gauge{
		{Name: "archivist_research_episodes", Help: "Active episodes by research state.", Labels: []string{"state"}},
		{Name: "archivist_research_leases_active", Help: "Active leases."},
		{Name: "archivist_research_researchers", Help: "Live researchers (keys fresh in the researchers bucket)."},
	}, func(ctx context.Context) (service.Readings, error) {
		st, err := p.store.Counts(ctx)
		if err != nil {
			return nil, err
		}
		live, _, err := research.Census(ctx, p.kv)
		if err != nil {
			return nil, err
		}
		e := st.Episodes
		return service.Readings{
			"archivist_research_episodes": {service.Read(float64(e.Complete), "complete"), service.Read(float64(e.InProgress), "in_progress"),
				service.Read(float64(e.Waiting), "waiting"), service.Read(float64(e.Parked), "parked"), service.Read(float64(e.WithFailedClips), "with_failed_clips")},
			"archivist_research_leases_active": {service.Read(float64(st.LeasesActive))},
			"archivist_research_researchers":   {service.Read(float64(live))},
		}, nil
	})
}

// openCacheFor is how long a reading of the open research is reused: every
// scrape and every scaler poll would otherwise query the database.
const openCacheFor = 5 * time.Second

// OpenResearch is the number of episodes waiting for research or being
// researched: the work researchers are for. The pwa itself keeps the work
// queue short (a few items per live researcher), so its depth says nothing
// of how many researchers are wanted; this does. A failed reading returns
// the last one.
func (p *PWA) OpenResearch() float64 {
	p.openMu.Lock()
	defer p.openMu.Unlock()
	if !p.openAt.IsZero() && time.Since(p.openAt) < openCacheFor {
		return p.open
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := p.store.Counts(ctx)
	if err != nil {
		p.log.WarnContext(ctx, "reading the open research for the metric", "err", err)
		return p.open
	}
	p.open, p.openAt = float64(st.Episodes.Waiting+st.Episodes.InProgress), time.Now()
	return p.open
}

// Wake asks for an activation soon.
func (p *PWA) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Work stores a merged work from the curator and wakes the pwa if it changed.
// Recorded learns that an object was stored: research waiting for that
// media (a clip's or an episode's that was not in the store yet) is due at
// once.
func (p *PWA) Recorded(ctx context.Context, m *bus.Message[events.ObjectRecorded]) error {
	n, err := p.store.MediaArrived(ctx, m.Event.Object)
	if err != nil {
		return err
	}
	if n > 0 {
		p.log.InfoContext(ctx, "media arrived: research waiting for it is due", "media", m.Event.Object, "released", n)
		p.Wake()
	}
	return nil
}

func (p *PWA) Work(ctx context.Context, m *bus.Message[events.WorkUpserted]) error {
	out, retired, err := p.store.ApplyWork(ctx, m.Event)
	if err != nil {
		return err
	}
	if out == research.Applied {
		p.Wake()
	}
	if retired != nil {
		p.retire(ctx, retired, m.Event.Version)
	}
	return nil
}

// retire tells researchers that no work names a piece of audio any more,
// so that they discard what they derived from it. Best effort: the
// work's change is committed, and a retirement that cannot be published
// leaves its prints in the blob store (a warning), never the works
// waiting.
func (p *PWA) retire(ctx context.Context, r *events.MediaRetired, version time.Time) {
	env, err := events.New(p.bus.Producer(), r)
	if err == nil {
		env.ID = fmt.Sprintf("retired:%s:%s", r.SHA256, version.UTC().Format(time.RFC3339Nano))
		_, err = p.bus.Publish(ctx, events.SubjectMediaRetired, env)
	}
	if err != nil {
		p.log.WarnContext(ctx, "media retirement not published; its prints stay in the blob store", "sha256", r.SHA256, "work", r.Work, "err", err)
		return
	}
	p.log.InfoContext(ctx, "media retired", "sha256", r.SHA256, "work", r.Work, "reason", r.Reason)
}

// retireUnusedPrints retires, a page at a time, the prints of audio no
// lease has named for PrintRetention: each published as
// research.media.retired (reason unused) for a researcher to discard.
// A page that fails is logged and tried again at the next check.
func (p *PWA) retireUnusedPrints(ctx context.Context) {
	const page = 500
	total := 0
	for ctx.Err() == nil {
		n, err := p.store.RetireUnusedPrints(ctx, p.cfg.PrintRetention, page, func(ctx context.Context, r *events.MediaRetired) error {
			env, err := events.New(p.bus.Producer(), r)
			if err != nil {
				return err
			}
			env.ID = fmt.Sprintf("retired:unused:%s:%s", r.SHA256, time.Now().UTC().Format("2006-01-02T15"))
			_, err = p.bus.Publish(ctx, events.SubjectMediaRetired, env)
			return err
		})
		total += n
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "prints of unused audio not all retired; the rest at the next check", "retired", total, "err", err)
			}
			return
		}
		if n < page {
			break
		}
	}
	if total > 0 {
		p.log.InfoContext(ctx, "prints of unused audio retired", "media", total, "retention", p.cfg.PrintRetention)
	}
}

// Loop activates on every wake and at least every Interval until ctx ends;
// it recounts the counters at start and every RecountInterval, and
// retires the prints of unused audio at start and every
// PrintCheckInterval.
func (p *PWA) Loop(ctx context.Context) {
	if err := p.store.Recount(ctx); err != nil && ctx.Err() == nil {
		p.log.ErrorContext(ctx, "recount", "err", err)
	}
	// A researcher that appears wakes the pwa.
	if w, err := p.kv.WatchAll(ctx, jetstream.UpdatesOnly()); err == nil {
		go func() {
			for e := range w.Updates() {
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					p.Wake()
				}
			}
		}()
	}
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	recount := time.NewTicker(p.cfg.RecountInterval)
	defer recount.Stop()
	var prints <-chan time.Time
	if p.cfg.PrintRetention > 0 && p.cfg.PrintCheckInterval > 0 {
		t := time.NewTicker(p.cfg.PrintCheckInterval)
		defer t.Stop()
		prints = t.C
		p.retireUnusedPrints(ctx)
	}
	for {
		if p.gate.Wait(ctx) != nil {
			return
		}
		if _, err := p.Activate(ctx); err != nil && ctx.Err() == nil && !p.gate.Observe(ctx, err) {
			p.log.ErrorContext(ctx, "activation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.wake:
		case <-recount.C:
			if err := p.store.Recount(ctx); err != nil && ctx.Err() == nil {
				p.log.ErrorContext(ctx, "recount", "err", err)
			}
		case <-prints:
			p.retireUnusedPrints(ctx)
		}
	}
}

// ShouldAdd is the spec's capacity check, steps 1 to 6, with step 3 ("move
// to step 7", a step that does not exist) read as "add a work item": with no
// researchers and an empty queue the pwa primes the queue with one item, so
// the first researcher to arrive finds work.
func ShouldAdd(researchers, pending int) bool {
	if researchers == 0 {
		return pending == 0 // step 3 (prime the queue), else step 4 (exit)
	}
	position := researchers - pending // step 5
	return position >= 0              // step 6: a negative position is a surplus of work
}

// Activate is one activation: expire leases, then add work items while the
// capacity check passes and there is work. It returns the items added (0
// when another replica is activating).
func (p *PWA) Activate(ctx context.Context) (int, error) {
	// One activation at a time across pwa replicas: two capacity checks
	// side by side would both see the same queue and fill it twice. A
	// replica that finds another activating skips this one (the other's
	// covers it, and it wakes again on the next event or tick).
	conn, err := p.store.DB().Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("activation lock: %w", err)
	}
	defer conn.Release()
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('archivist.pwa.activation'))`).Scan(&mine); err != nil {
		return 0, fmt.Errorf("activation lock: %w", err)
	}
	if !mine {
		return 0, nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtext('archivist.pwa.activation'))`); err != nil {
			conn.Conn().Close(uctx) // the lock goes with the session
		}
	}()
	return p.activate(ctx)
}

func (p *PWA) activate(ctx context.Context) (int, error) {
	census, err := research.TakeCensus(ctx, p.kv)
	if err != nil {
		return 0, err
	}
	// A live researcher still analysing keeps its lease: extended before
	// any lease expires, so that a slow node's episode is not leased twice.
	for _, id := range census.Held {
		if _, err := p.store.Hold(ctx, id, p.cfg.Research.LeaseDuration); err != nil {
			return 0, err
		}
	}
	if expired, err := p.store.ExpireLeases(ctx); err != nil {
		return 0, err
	} else if len(expired) > 0 {
		p.log.WarnContext(ctx, "leases expired: their unfinished clips are free again, and each counts a failure of its episode", "leases", expired)
	}
	if n, err := p.store.ReleaseDue(ctx); err != nil {
		return 0, err
	} else if n > 0 {
		p.log.InfoContext(ctx, "research waiting after a failure is due again", "pairs", n)
	}
	researchers, busy := census.Live, census.Busy
	pending, err := p.pending(ctx, busy)
	if err != nil {
		return 0, err
	}
	added := 0
	// Each pass is one activation of the spec; the bound keeps a miscount
	// from flooding the queue.
	for added <= researchers+1 && ShouldAdd(researchers, pending+added) {
		ok, err := p.addItem(ctx)
		if err != nil || !ok {
			return added, err
		}
		added++
	}
	return added, nil
}

// pending is the number of work items in the queue that no researcher
// holds: those never delivered (NumPending), and those delivered but held
// by no busy researcher, that is waiting for redelivery after a nak with
// a delay or a researcher's death (JetStream counts both in NumAckPending,
// with the ones researchers hold).
func (p *PWA) pending(ctx context.Context, busy int) (int, error) {
	cons, err := p.bus.JetStream().Consumer(ctx, events.Researchers.Stream, events.Researchers.Config.Durable)
	if err != nil {
		return 0, fmt.Errorf("researchers consumer: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("researchers consumer: %w", err)
	}
	return int(info.NumPending) + max(info.NumAckPending-busy, 0), nil
}

// addItem selects and leases work and publishes the work item with a TTL
// shorter than the lease. If publishing fails the lease is revoked at once,
// so its clips are free again.
func (p *PWA) addItem(ctx context.Context) (bool, error) {
	l, err := p.store.Lease(ctx, p.cfg.Research.MaxClips, p.cfg.Research.LeaseDuration)
	if err != nil || l == nil {
		return false, err
	}
	item := &events.WorkItem{LeaseID: l.ID, Episode: l.Episode, Clips: l.Clips, LeaseExpiresAt: l.ExpiresAt,
		ItemExpiresAt: events.Now().Add(p.cfg.Research.ItemTTL)}
	env, err := events.New(p.bus.Producer(), item)
	if err != nil {
		return false, err
	}
	env.ID = "lease:" + l.ID
	// The item continues the episode's trace (from its curation request),
	// so that the researcher's work and the cwa's results are in it.
	pctx := telemetry.WithTraceparent(ctx, l.Traceparent)
	if _, err := p.bus.Publish(pctx, events.SubjectWorkItem, env, jetstream.WithMsgTTL(p.cfg.Research.ItemTTL)); err != nil {
		if _, rerr := p.store.Revoke(context.WithoutCancel(ctx), l.ID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return false, err
	}
	p.leased.Inc()
	p.log.InfoContext(ctx, "work leased", "lease", l.ID, "episode", l.Episode.Key, "clips", len(l.Clips), "expires_at", l.ExpiresAt)
	return true, nil
}

// Status is the research status: the database's view plus queue depth and
// live researchers.
func (p *PWA) Status(ctx context.Context) (research.Status, error) {
	st, err := p.store.Status(ctx)
	if err != nil {
		return st, err
	}
	live, busy, err := research.Census(ctx, p.kv)
	if err != nil {
		return st, err
	}
	pending, err := p.pending(ctx, busy)
	if err != nil {
		return st, err
	}
	st.QueueDepth, st.Researchers = int64(pending), live
	return st, nil
}

// Handler serves GET /v1/research/status and /v1/research/history, and
// the operators' actions on an episode.
func (p *PWA) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/research/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := p.Status(r.Context())
		if err != nil {
			reply.Internal(w, p.log, err, "research status")
			return
		}
		reply.JSON(w, http.StatusOK, st)
	})
	// An episode's research as an operator follows it (the dashboard).
	mux.HandleFunc("GET /v1/research/history", service.HistoryHandler(p.log, "episode", research.ErrNoEpisode, p.store.History))
	// An operator has all an episode's clips researched again (the locator
	// improved, say); release and retry are the work kit's verbs.
	mux.HandleFunc("POST /v1/research/episodes/{key}/redo", func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		forgot, known, err := p.store.Redo(r.Context(), key, false)
		if err != nil {
			reply.Internal(w, p.log, err, "redo episode", "episode", key)
			return
		}
		if !known {
			reply.Error(w, http.StatusNotFound, "no episode "+key)
			return
		}
		p.log.Info("episode researched again by an operator", "episode", key, "action", "redo", "results_forgotten", forgot)
		p.Wake()
		reply.JSON(w, http.StatusOK, map[string]any{"episode": key, "action": "redo", "results_forgotten": forgot})
	})
	// The operator's work: episodes found and acted on with the work kit.
	ws := &work.Store{DB: p.store.DB(), Schema: migrations.Schema.Name, Sources: p.store.WorkSources(p.Wake)}
	ws.Handle(mux, p.log)
	return work.MarkRoutes(httpauth.RoutesOf(mux))
}
