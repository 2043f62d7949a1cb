// Package curator is the curator service: it keeps the source records that
// other systems curate (from JetStream and over HTTP), versioned by the send
// time of the event that described them, matches records that say they are
// the same into work graphs, and merges each graph into one work.
package curator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/groupcommit"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/completeness"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/httpapi"
	"github.com/archivist/archivist/services/curator/ingest/pipeline"
	"github.com/archivist/archivist/services/curator/ingest/views"
	"github.com/archivist/archivist/services/curator/ingest/withdraw"
	"github.com/archivist/archivist/services/curator/ingest/workitems"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
	"github.com/archivist/archivist/services/curator/migrations"
)

// Config is the curator's own configuration.
type Config struct {
	// HTTPAddr is where the curation API listens.
	HTTPAddr string `env:"CURATOR_HTTP_ADDR, default=:8080"`
	// Concurrency is how many events each consumer holds at once: the
	// matcher and the merger write what they hold in groups of up to 256.
	Concurrency int `env:"CURATOR_CONCURRENCY, default=256"`
	// SourcePrecedence lists curating systems, most trusted first: the
	// merged work takes its title and media from the first that has them.
	SourcePrecedence string `env:"CURATOR_SOURCE_PRECEDENCE"`
	// TrustedLinkers lists the sources whose same-as links to another
	// source's records count without a link back; any other source's
	// count once the record it names links back.
	TrustedLinkers string `env:"CURATOR_TRUSTED_LINKERS"`
	// MaxPriority is the highest priority a source's records keep (a
	// higher one is lowered to it), and SourceMaxPriority the limits of
	// named sources (source=N,...).
	MaxPriority       int32  `env:"CURATOR_MAX_PRIORITY, default=1000"`
	SourceMaxPriority string `env:"CURATOR_SOURCE_MAX_PRIORITY"`
	// ReconcileInterval is how often match results whose works were never
	// written (lost on the bus) are published again.
	ReconcileInterval time.Duration `env:"CURATOR_RECONCILE_INTERVAL, default=5m"`
	// ResyncInterval is how often every work is published again, so that a
	// consumer that lost a works message (the pwa) catches up; 0 disables.
	ResyncInterval time.Duration `env:"CURATOR_RESYNC_INTERVAL, default=24h"`
	// HistoryRetention is how long the explanation of every work the
	// merger wrote is kept (a work's newest whatever its age); 0 keeps
	// them all.
	HistoryRetention time.Duration `env:"CURATOR_HISTORY_RETENTION, default=8760h"`
	// InvariantInterval is how often the leader checks the next page of
	// records and works against curation's promise (package completeness);
	// 0 disables. InvariantPage is how many records and works of each kind
	// a check reads, and InvariantGrace how long a record or work may be in
	// flight before it is judged.
	InvariantInterval time.Duration `env:"CURATOR_INVARIANT_INTERVAL, default=1s"`
	InvariantPage     int           `env:"CURATOR_INVARIANT_PAGE, default=5000"`
	InvariantGrace    time.Duration `env:"CURATOR_INVARIANT_GRACE, default=10m"`
	// InvariantEvery is how often a pass over the catalogue starts at most.
	InvariantEvery time.Duration `env:"CURATOR_INVARIANT_EVERY, default=10m"`
	// Ingest configures the ingest daemons.
	Ingest pipeline.Config
}

// Definition is the curator service.
func Definition() service.Definition {
	return service.Definition{
		Name:      "curator",
		Summary:   "stores curated episodes and clips (NATS and HTTP), newest version wins; matches same-as records into graphs and merges each into one work; ingests batches into storage and inventory",
		Schemas:   []store.Schema{migrations.Schema},
		NeedsDB:   true,
		NeedsBus:  true,
		NeedsBlob: true,
		Run:       service.Configured(run),
		Config:    new(Config),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	limits, err := parsePriorities(cfg.SourceMaxPriority)
	if err != nil {
		return err
	}
	p := NewPipeline(env.Bus, catalog.New(env.DB, env.Metrics, env.Log),
		merger.New(env.DB, strings.Split(cfg.SourcePrecedence, ","), env.Metrics, env.Log),
		matcher.TrustedLinkers(strings.Split(cfg.TrustedLinkers, ",")...), matcher.MaxPriority(cfg.MaxPriority, limits))
	if env.Metrics != nil {
		env.Metrics.MustRegister(p.Collectors()...)
	}
	ist := ingest.NewStore(env.DB)
	env.ReadGauges(views.BacklogGauges, func(ctx context.Context) (service.Readings, error) { return views.Backlog(ctx, ist) })
	ing, err := pipeline.New(cfg.Ingest, ist, env.Blob, env.Bus, env.Log)
	if err != nil {
		return err
	}
	ing.SetGate(env.Gate)
	subs, err := p.Start(ctx, cfg.Concurrency)
	if err != nil {
		ing.Close()
		return err
	}
	// Reconciling and the daily resync run in one replica at a time (the
	// leader): every replica republishing every work daily outgrew the
	// WORKS stream.
	singletons := []service.Loop{service.Every(cfg.ReconcileInterval, func(ctx context.Context) {
		if n, err := p.Reconcile(ctx); err != nil && ctx.Err() == nil {
			env.Log.ErrorContext(ctx, "reconcile match results", "err", err)
		} else if n > 0 {
			env.Log.WarnContext(ctx, "republished match results whose works were missing", "graphs", n)
		}
	})}
	if cfg.InvariantInterval > 0 {
		check := completeness.New(env.DB, p.Rematch, env.Metrics, env.Log,
			completeness.WithPage(cfg.InvariantPage), completeness.WithGrace(cfg.InvariantGrace), completeness.WithEvery(cfg.InvariantEvery))
		singletons = append(singletons, service.Every(cfg.InvariantInterval, func(ctx context.Context) {
			if env.Gate.Wait(ctx) != nil {
				return
			}
			if _, err := check.Step(ctx); err != nil && ctx.Err() == nil && !env.Gate.Observe(ctx, err) {
				env.Log.ErrorContext(ctx, "check curation's invariant", "err", err)
			}
		}))
	}
	if cfg.ResyncInterval > 0 {
		singletons = append(singletons, service.Every(cfg.ResyncInterval, func(ctx context.Context) {
			if n, err := p.ResyncWorks(ctx); err != nil && ctx.Err() == nil {
				env.Log.ErrorContext(ctx, "resync works", "err", err)
			} else {
				env.Log.InfoContext(ctx, "works published again for their consumers", "rows", n)
			}
		}))
	}
	if cfg.HistoryRetention > 0 {
		singletons = append(singletons, service.Every(cfg.ReconcileInterval, func(ctx context.Context) {
			before := time.Now().Add(-cfg.HistoryRetention)
			for ctx.Err() == nil {
				n, err := merger.PruneHistory(ctx, env.DB, before, 5000)
				if err != nil {
					if ctx.Err() == nil {
						env.Log.ErrorContext(ctx, "prune the works' explanations", "err", err)
					}
					return
				}
				if n > 0 {
					env.Log.InfoContext(ctx, "explanations past their retention pruned", "rows", n, "written_before", before)
				}
				if n < 5000 {
					return
				}
			}
		}))
	}
	// The register of takedowns, replayed a page a tick: a restore of the
	// database does not undo a takedown.
	wd := &withdraw.Withdrawer{DB: env.DB, Blob: env.Blob, Bus: env.Bus, Log: env.Log}
	singletons = append(singletons, service.Every(cfg.Ingest.TidyInterval, func(ctx context.Context) {
		if env.Gate.Wait(ctx) != nil {
			return
		}
		if r, err := wd.Replay(ctx, 500); err != nil && ctx.Err() == nil && !env.Gate.Observe(ctx, err) {
			env.Log.ErrorContext(ctx, "replay the takedown register", "err", err)
		} else if r.Applied > 0 {
			env.Log.WarnContext(ctx, "takedowns the database had lost applied again from the store's register", "applied", r.Applied)
		}
	}))
	loops := []service.Loop{
		func(ctx context.Context) error { ing.Run(ctx); return nil },
		env.AsLeader("curator.reconcile", service.All(singletons...)),
	}
	var stoppers []func(context.Context) error
	for _, s := range subs {
		stoppers = append(stoppers, s.Stop)
	}
	mux := http.NewServeMux()
	curation := api.New(env.Bus, p.Catalog, env.Log)
	curation.Decide = p.Decide
	curation.Routes(mux)
	httpapi.Routes(mux, ist, wd, env.Log)
	// The operator's work across ingest and the collections' mails.
	ws := &work.Store{DB: env.DB, Schema: migrations.Schema.Name, Sources: workitems.Sources(ist)}
	ws.Handle(mux, env.Log)
	h := work.MarkRoutes(httpauth.PublisherRoutes(mux, append(api.PublisherRoutes, httpapi.PublisherRoutes...)...).Operator(httpapi.OperatorRoutes...))
	return env.Serve(ctx, "curation API", cfg.HTTPAddr, h, loops, stoppers...)
}

// Pipeline is the curator's stages on the bus: curation events through the
// matcher into match results, match results through the merger into works.
type Pipeline struct {
	// Catalog stores the source records.
	Catalog *catalog.Catalog
	// Matcher matches records into graphs.
	Matcher *matcher.Matcher
	// Merger builds works from graphs.
	Merger *merger.Merger

	bus *bus.Bus
	// rejecting are the sources whose rejections consumer is made.
	rejecting sync.Map
	// The events the consumers hold are matched, and the match results
	// merged, in groups (pkg/groupcommit): a group is one transaction and
	// one publication, so a record costs a share of a group's round trips.
	matches map[catalog.Kind]*groupcommit.Committer[catalog.Record]
	merges  *groupcommit.Committer[merger.Match]
	// groupItems, groupSeconds and groupFailures describe the groups.
	groupItems, groupSeconds *prometheus.HistogramVec
	groupFailures            *prometheus.CounterVec
}

// Collectors are the pipeline's metrics: the size and the time of the
// matcher's and the merger's groups, and the groups that failed (and were
// written again one item at a time).
func (p *Pipeline) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.groupItems, p.groupSeconds, p.groupFailures}
}

// observe is the groups' metrics of stage.
func observe[T any](p *Pipeline, stage string) groupcommit.Option[T] {
	items, seconds, failures := p.groupItems.WithLabelValues(stage), p.groupSeconds.WithLabelValues(stage), p.groupFailures.WithLabelValues(stage)
	return groupcommit.Observe[T](func(size int, took time.Duration, err error) {
		items.Observe(float64(size))
		seconds.Observe(took.Seconds())
		if err != nil {
			failures.Inc()
		}
	})
}

// NewPipeline wires the stages on b, the matcher with opts.
func NewPipeline(b *bus.Bus, cat *catalog.Catalog, m *merger.Merger, opts ...matcher.Option) *Pipeline {
	p := &Pipeline{Catalog: cat, Matcher: matcher.New(cat, b.Producer(), opts...), Merger: m, bus: b,
		groupItems: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "archivist_curator_group_items",
			Help:    "Events (match: records; merge: match results) the curator matched or merged in one transaction, by stage.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}, []string{"stage"}),
		groupSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "archivist_curator_group_seconds",
			Help:    "How long the curator took to match or merge a group and publish what it made, by stage.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"stage"}),
		groupFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archivist_curator_group_failures_total",
			Help: "Groups that failed and were matched or merged again one event at a time, by stage.",
		}, []string{"stage"}),
	}
	byKey := groupcommit.Keys(func(r catalog.Record) []string { return []string{r.Key()} })
	p.matches = map[catalog.Kind]*groupcommit.Committer[catalog.Record]{
		catalog.Episode: groupcommit.New(p.matchGroup, byKey, observe[catalog.Record](p, "match-episode")),
		catalog.Clip:    groupcommit.New(p.matchGroup, byKey, observe[catalog.Record](p, "match-clip")),
	}
	p.merges = groupcommit.New(p.mergeGroup, groupcommit.Keys(func(m merger.Match) []string {
		keys := make([]string, len(m.Graph.Members))
		for i, k := range m.Graph.Members {
			keys[i] = m.Graph.Kind + ":" + k
		}
		return keys
	}), observe[merger.Match](p, "merge"))
	return p
}

// parsePriorities reads CURATOR_SOURCE_MAX_PRIORITY: source=N,...
func parsePriorities(list string) (map[string]int32, error) {
	out := map[string]int32{}
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		src, n, ok := strings.Cut(f, "=")
		p, err := strconv.ParseInt(n, 10, 32)
		if !ok || err != nil || events.ValidateSource("source", src) != nil {
			return nil, fmt.Errorf("CURATOR_SOURCE_MAX_PRIORITY: %q is not source=N", f)
		}
		out[src] = int32(p)
	}
	return out, nil
}

// Start consumes curation events and match results until the returned
// subscriptions are stopped.
func (p *Pipeline) Start(ctx context.Context, concurrency int) ([]*bus.Subscription, error) {
	var subs []*bus.Subscription
	stopAll := func(err error) ([]*bus.Subscription, error) {
		for _, s := range subs {
			err = errors.Join(err, s.Stop(context.Background()))
		}
		return nil, err
	}
	rejections := bus.WithRejections(func(subject string) (string, bool) {
		source, ok := events.SourceOfSubject(subject)
		if ok {
			p.rejectionsOf(ctx, source)
		}
		return events.RejectedSubject(source), ok
	})
	episodes, err := bus.Consume(ctx, p.bus, events.CuratorEpisodes, p.Episode, bus.WithConcurrency(concurrency), rejections)
	if err != nil {
		return stopAll(err)
	}
	subs = append(subs, episodes)
	clips, err := bus.Consume(ctx, p.bus, events.CuratorClips, p.Clip, bus.WithConcurrency(concurrency), rejections)
	if err != nil {
		return stopAll(err)
	}
	subs = append(subs, clips)
	merges, err := bus.Consume(ctx, p.bus, events.CuratorMerger, p.Merge, bus.WithConcurrency(concurrency))
	if err != nil {
		return stopAll(err)
	}
	return append(subs, merges), nil
}

// Episode stores an EpisodeUpserted event and matches its graph.
func (p *Pipeline) Episode(ctx context.Context, m *bus.Message[events.EpisodeUpserted]) error {
	if source, ok := events.SourceOfSubject(m.Subject); ok {
		p.rejectionsOf(ctx, source)
	}
	if err := admit(m.Subject, m.Envelope, &m.Event.Source); err != nil {
		return err
	}
	return p.match(ctx, catalog.FromEpisode(m.Envelope, m.Event))
}

// Clip stores a ClipUpserted event and matches its graph.
func (p *Pipeline) Clip(ctx context.Context, m *bus.Message[events.ClipUpserted]) error {
	if source, ok := events.SourceOfSubject(m.Subject); ok {
		p.rejectionsOf(ctx, source)
	}
	if err := admit(m.Subject, m.Envelope, &m.Event.Source); err != nil {
		return err
	}
	return p.match(ctx, catalog.FromClip(m.Envelope, m.Event))
}

// rejectionsOf makes source's pull consumer of its rejections, once per
// process (its publisher reads it, and may not make it: N30). A failure is
// logged and tried again at the source's next event; it holds up nothing.
func (p *Pipeline) rejectionsOf(ctx context.Context, source string) {
	if _, done := p.rejecting.Load(source); done {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := p.bus.JetStream().CreateOrUpdateConsumer(ctx, events.StreamRejected, events.RejectedConsumer(source)); err != nil {
		p.bus.Log().Warn("the rejections consumer of a source could not be made; tried again at its next event", "source", source, "err", err)
		return
	}
	p.rejecting.Store(source, true)
}

// admit checks a curation event before anything of it is stored: its time
// (notFromTheFuture), and its source against its subject's. The subject is
// what the publisher's NATS user may publish on (curation.<source>.…), so it
// decides: a payload naming another source is refused for good, and one
// naming none takes the subject's. An event on an unsourced subject of
// earlier versions keeps its payload's source.
func admit(subject string, env events.Envelope, source *string) error {
	if err := notFromTheFuture(env); err != nil {
		return err
	}
	on, ok := events.SourceOfSubject(subject)
	if !ok {
		return nil
	}
	if *source != "" && *source != on {
		return fault.Permanent(fmt.Errorf("the record names source %q but was published on %s, source %q's subject: refused, nothing stored", *source, subject, on))
	}
	*source = on
	return nil
}

// notFromTheFuture refuses, for good (dead-lettered with the reason), an
// event sent more than events.MaxClockSkew from now: its time is its
// version, and one dated 9999 would win over every later change of its
// record for ever. The HTTP API refuses such a time with a 400; over NATS
// the same bound applies here.
func notFromTheFuture(env events.Envelope) error {
	if limit := events.Now().Add(events.MaxClockSkew); env.SentAt.After(limit) {
		return fault.Permanent(fmt.Errorf("sent_at %s is more than %s in the future (events.MaxClockSkew): refused, nothing stored",
			env.SentAt.Format(time.RFC3339), events.MaxClockSkew))
	}
	return nil
}

// match runs the matcher, in a group with the other events the consumers
// hold, and publishes its results; the event is acked only once they are
// on the bus, so a crash in between re-runs the match.
func (p *Pipeline) match(ctx context.Context, rec catalog.Record) error {
	return p.matches[rec.Kind].Do(ctx, rec)
}

// matchGroup matches a group of records of one kind and publishes the
// results.
func (p *Pipeline) matchGroup(ctx context.Context, recs []catalog.Record) error {
	_, results, err := p.Matcher.ApplyGroup(ctx, recs)
	if err != nil {
		return err
	}
	of := recs[0].Key()
	if len(recs) > 1 {
		of = fmt.Sprintf("%d records from %s", len(recs), of)
	}
	return p.publish(ctx, results, of)
}

// publish puts match results on the bus for the merger; of names what they
// are of, for the error.
func (p *Pipeline) publish(ctx context.Context, results []matcher.Result, of string) error {
	out := make([]bus.Outgoing, len(results))
	for i, r := range results {
		out[i] = bus.Outgoing{Subject: events.SubjectGraphMatched, Envelope: r.Envelope}
	}
	if err := p.bus.PublishBatch(ctx, out); err != nil {
		return fmt.Errorf("publish match results of %s: %w", of, err)
	}
	return nil
}

// Rematch matches key's graph again and publishes the results: the
// invariant's healing (package completeness).
func (p *Pipeline) Rematch(ctx context.Context, kind catalog.Kind, key string) error {
	results, err := p.Matcher.Rematch(ctx, kind, key)
	if err != nil {
		return err
	}
	return p.publish(ctx, results, key)
}

// Decide takes an operator's decision (matcher.Decide) and publishes the
// match results it makes: the merger rewrites the works.
func (p *Pipeline) Decide(ctx context.Context, d matcher.Decision) (matcher.Decision, error) {
	d, results, err := p.Matcher.Decide(ctx, d)
	if err != nil {
		return d, err
	}
	return d, p.publish(ctx, results, d.A)
}

// Reconcile publishes again the match results whose works are missing or
// older than the stored graph (PostgreSQL is the truth; a queue is a
// wake-up call). It returns how many it published.
func (p *Pipeline) Reconcile(ctx context.Context) (int, error) {
	results, err := p.Matcher.Lagging(ctx, 1000)
	if err != nil || len(results) == 0 {
		return 0, err
	}
	if err := p.publish(ctx, results, "lagging graphs"); err != nil {
		return 0, err
	}
	return len(results), nil
}

// ResyncWorks publishes every stored work row again, with its own version
// (and a message id of this resync's, so JetStream does not drop it as a
// duplicate of the original): consumers keep the newest version per key, so
// for them a row they have is a replay and a row they lost is repaired. A
// row the stream holds a newer version of (merged since it was read) is
// not published. It returns how many rows it published.
func (p *Pipeline) ResyncWorks(ctx context.Context) (int, error) {
	total := 0
	suffix := fmt.Sprintf(":resync:%d", time.Now().UnixNano())
	for _, kind := range []catalog.Kind{catalog.Episode, catalog.Clip} {
		rows, err := merger.Rows(ctx, p.Catalog.DB(), kind)
		if err != nil {
			return total, err
		}
		for start := 0; start < len(rows); start += 1000 {
			out, err := p.worksOut(rows[start:min(start+1000, len(rows))], suffix)
			if err != nil {
				return total, err
			}
			n, err := p.bus.PublishNewest(ctx, events.StreamWorks, out, true)
			total += n
			if err != nil {
				return total, fmt.Errorf("resync works: %w", err)
			}
		}
	}
	return total, nil
}

// worksOut is the outgoing messages of work rows, each sent at its version
// with an id derived from key and version (and suffix).
func (p *Pipeline) worksOut(rows []merger.Row, suffix string) ([]bus.Outgoing, error) {
	out := make([]bus.Outgoing, 0, len(rows))
	for i := range rows {
		env, err := events.NewAt(p.bus.Producer(), rows[i].Version, &rows[i])
		if err != nil {
			return nil, err
		}
		env.ID = fmt.Sprintf("work:%s:%s:%d%s", rows[i].Kind, rows[i].Key, rows[i].Version.UnixMicro(), suffix)
		out = append(out, bus.Outgoing{Subject: events.WorkSubject(rows[i].Kind, rows[i].Key), Envelope: env})
	}
	return out, nil
}

// Merge builds the works of a match result, in a group with the other
// results the consumer holds, and publishes them.
func (p *Pipeline) Merge(ctx context.Context, m *bus.Message[events.GraphMatched]) error {
	return p.merges.Do(ctx, merger.Match{SentAt: m.Envelope.SentAt, Graph: m.Event})
}

// mergeGroup merges a group of match results whose graphs share no key
// and publishes the works.
func (p *Pipeline) mergeGroup(ctx context.Context, group []merger.Match) error {
	rows, err := p.Merger.ApplyGroup(ctx, group)
	if err != nil {
		return err
	}
	var out []bus.Outgoing
	for _, rs := range rows {
		o, err := p.worksOut(rs, "")
		if err != nil {
			return err
		}
		out = append(out, o...)
	}
	// Over an older version only: a merger replica that is behind, or a
	// resync that read before this merge, never hides a newer work.
	if _, err := p.bus.PublishNewest(ctx, events.StreamWorks, out, false); err != nil {
		return fmt.Errorf("publish works of %d graphs from %s: %w", len(group), group[0].Graph.Members[0], err)
	}
	return nil
}
