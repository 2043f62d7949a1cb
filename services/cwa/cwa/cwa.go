// Package cwa is the completed-work archivist (tbtl-work-assignment.txt): it
// stores each researcher's result for a clip, idempotently, extends the
// result's lease, and revokes the lease on the final result. Results for a
// revoked or expired lease are stored and extend nothing. Replicas run in
// parallel on one shared consumer.
package cwa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
)

// Config is the cwa's configuration.
type Config struct {
	// Research is shared with the pwa and researchers.
	Research research.Config
	// Concurrency is how many results are stored at once.
	Concurrency int `env:"CWA_CONCURRENCY, default=8"`
}

// Definition is the cwa service.
func Definition() service.Definition {
	return service.Definition{
		Name:     "cwa",
		Summary:  "stores research results, extends leases, and revokes them on the final item",
		Schemas:  []store.Schema{migrations.Schema},
		NeedsDB:  true,
		NeedsBus: true,
		Run:      service.Configured(run),
		Config:   new(Config),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	if err := cfg.Research.Check(); err != nil {
		return err
	}
	c := New(env.Bus, research.New(env.DB, research.WithConfig(cfg.Research)), cfg.Research, env.Metrics, env.Log)
	sub, err := bus.Consume(ctx, env.Bus, events.CWAResults, c.Result, bus.WithConcurrency(cfg.Concurrency),
		bus.WithRetryDelay(100*time.Millisecond, 10*time.Second))
	if err != nil {
		return err
	}
	env.Ready()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), env.ShutdownTimeout)
	defer cancel()
	return sub.Stop(sctx)
}

// finalPatience is how many deliveries of a final result wait for its
// siblings before the lease is revoked regardless; siblingWait is how long
// each wait is. A wait is a planned retry (bus.RetryAfter), not a failure.
const (
	finalPatience = 4
	siblingWait   = 500 * time.Millisecond
)

// CWA handles completed-research events.
type CWA struct {
	bus     *bus.Bus
	store   *research.Store
	cfg     research.Config
	log     *slog.Logger
	results *prometheus.CounterVec
}

// New returns a CWA.
func New(b *bus.Bus, s *research.Store, cfg research.Config, reg prometheus.Registerer, log *slog.Logger) *CWA {
	c := &CWA{bus: b, store: s, cfg: cfg, log: log, results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archivist_cwa_results_total",
		Help: "Results received, by outcome (stored; duplicate: a second result of a pair; redelivered: a delivery again of one stored; stale; episode_parked; episode_waits: a failure of its audio that may pass).",
	}, []string{"outcome"})}
	if reg != nil {
		reg.MustRegister(c.results)
	}
	return c
}

// Result stores one result, then extends its lease, or revokes it if the
// result is final, and wakes the pwa when a lease ends.
func (c *CWA) Result(ctx context.Context, m *bus.Message[events.ResearchCompleted]) error {
	r := m.Event
	if r.EpisodeFailure != "" {
		return c.episodeFailed(ctx, m)
	}
	stored, err := c.store.StoreResult(ctx, r)
	if errors.Is(err, research.ErrUnknownPair) {
		return fault.Permanent(err)
	}
	if errors.Is(err, research.ErrStaleResult) {
		// Computed from audio since replaced: dropped, and the work is
		// researched again. A final result still ends its lease.
		c.results.WithLabelValues("stale").Inc()
		c.log.InfoContext(ctx, "stale result dropped: the media changed after its lease was made", "lease", r.LeaseID, "episode", r.Episode, "clip", r.Clip)
		if r.Final {
			if _, err := c.store.Revoke(ctx, r.LeaseID); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	// A redelivery of a result whose first delivery stored it (a final
	// result waiting for its siblings, or one whose ack was lost) is not a
	// second result: only a first delivery that stores nothing is a
	// duplicate.
	outcome := "stored"
	switch {
	case !stored && m.Metadata.NumDelivered > 1:
		outcome = "redelivered"
	case !stored:
		outcome = "duplicate"
	}
	c.results.WithLabelValues(outcome).Inc()
	log := c.log.With("lease", r.LeaseID, "episode", r.Episode, "clip", r.Clip, "researcher", r.Researcher)
	if r.Final && r.Sent > 1 && m.Metadata.NumDelivered < finalPatience {
		// Results travel through parallel replicas: wait (by redelivery)
		// until the final result's siblings are stored before revoking.
		stored, err := c.store.StoredOfLease(ctx, r.LeaseID)
		if err != nil {
			return err
		}
		if stored < r.Sent {
			log.DebugContext(ctx, "final result waits for its siblings", "stored", stored, "sent", r.Sent, "delivery", m.Metadata.NumDelivered)
			return bus.RetryAfter(siblingWait)
		}
	}
	if r.Final {
		revoked, err := c.store.Revoke(ctx, r.LeaseID)
		if err != nil {
			return err
		}
		if err := c.store.EpisodeSucceeded(ctx, r.LeaseID); err != nil {
			return err
		}
		log.InfoContext(ctx, "final result; lease revoked", "was_active", revoked, "outcome", outcome)
		if err := c.bus.Conn().Publish(events.SubjectPWAWake, nil); err != nil {
			log.WarnContext(ctx, "wake the pwa", "err", err)
		}
		return nil
	}
	extended, err := c.store.Extend(ctx, r.LeaseID, c.cfg.LeaseDuration)
	if err != nil {
		return err
	}
	log.DebugContext(ctx, "result", "outcome", outcome, "lease_extended", extended, "occurrences", len(r.Occurrences))
	return nil
}

// episodeFailed parks an episode whose own audio cannot be researched and
// revokes its lease at once (the clips it held are free, for when the
// episode is released), once the item's other results are stored.
func (c *CWA) episodeFailed(ctx context.Context, m *bus.Message[events.ResearchCompleted]) error {
	r := m.Event
	log := c.log.With("lease", r.LeaseID, "episode", r.Episode, "researcher", r.Researcher)
	if r.Sent > 1 && m.Metadata.NumDelivered < finalPatience {
		stored, err := c.store.StoredOfLease(ctx, r.LeaseID)
		if err != nil {
			return err
		}
		if stored < r.Sent-1 {
			log.DebugContext(ctx, "episode failure waits for its siblings", "stored", stored, "sent", r.Sent-1, "delivery", m.Metadata.NumDelivered)
			return bus.RetryAfter(siblingWait)
		}
	}
	known, parked, err := c.store.EpisodeFailure(ctx, r.LeaseID, r.Episode, r.EpisodeFailure, r.FailureKind)
	if err != nil {
		return err
	}
	if !known {
		return fault.Permanent(fmt.Errorf("episode failure for %s: %w", r.Episode, research.ErrUnknownPair))
	}
	if _, err := c.store.Revoke(ctx, r.LeaseID); err != nil {
		return err
	}
	if parked {
		c.results.WithLabelValues("episode_parked").Inc()
		log.WarnContext(ctx, "episode parked: its audio cannot be researched; lease revoked", "reason", r.EpisodeFailure, "kind", r.FailureKind)
	} else {
		c.results.WithLabelValues("episode_waits").Inc()
		log.WarnContext(ctx, "episode waits: its audio could not be researched this time; lease revoked, retried later", "reason", r.EpisodeFailure, "kind", r.FailureKind)
	}
	if err := c.bus.Conn().Publish(events.SubjectPWAWake, nil); err != nil {
		log.WarnContext(ctx, "wake the pwa", "err", err)
	}
	return nil
}
