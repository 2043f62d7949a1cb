package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SetConfig bounds a Set's daemons (the INGEST_* variables of the
// same names).
type SetConfig struct {
	// Interval is how long a daemon with nothing to do waits before
	// looking again, and the first backoff after a failed attempt.
	Interval time.Duration
	// RetryMax caps the backoff; RetryBudget and MaxAttempts bound the
	// failed attempts at one state (fault.Policy).
	RetryMax, RetryBudget time.Duration
	MaxAttempts           int
	// Concurrency is how many entities each daemon works at once;
	// MaxClaims how many all the daemons hold claimed, besides one of
	// each daemon's own.
	Concurrency, MaxClaims int
	// StepTimeout bounds one attempt's work; JobTimeout an entity's work
	// over all its attempts and states (0: none).
	StepTimeout, JobTimeout time.Duration
	// DepositorShare is the most of a state's Concurrency one depositor's
	// entities hold at once, in percent (at least one entity; 0: all).
	DepositorShare int
}

// Set is the daemons of the states that have work, one per state, with
// the claim slots and the connection pool they share.
type Set struct {
	store   *ingest.Store
	cfg     SetConfig
	log     *slog.Logger
	daemons []*daemon
	claims  *pgxpool.Pool
	shared  chan struct{}
	held    sync.Map
}

// NewSet makes an empty set over s. Claims hold a connection each for
// the length of their work: they get a pool of their own. The daemons
// share MaxClaims claim slots (11 daemons of INGEST_CONCURRENCY each
// could otherwise open 88 connections), and each has one more of its
// own, taken when no shared one is free, so that no state starves
// another (eight long downloads and eight long stores once held every
// slot while reports and notifications waited for hours).
func NewSet(s *ingest.Store, cfg SetConfig, log *slog.Logger) (*Set, error) {
	set := &Set{store: s, cfg: cfg, log: log, shared: make(chan struct{}, max(cfg.MaxClaims, 0))}
	pc := s.DB.Config().Copy()
	// Besides the shared slots, one of its own for each state a daemon works.
	own := map[ingest.Transition]bool{}
	for _, t := range ingest.Transitions {
		if t.By == ingest.Daemon {
			own[ingest.Transition{Entity: t.Entity, From: t.From}] = true
		}
	}
	pc.MaxConns = int32(max(cfg.MaxClaims, 0) + len(own))
	pc.MinConns = 0
	claims, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("ingest claims pool: %w", err)
	}
	set.claims = claims
	s.OnMove(set.Wake)
	return set, nil
}

// Add gives state st of entity e a daemon doing w.
func (s *Set) Add(e ingest.Entity, st ingest.State, w Work) {
	cfg := s.cfg
	s.daemons = append(s.daemons, &daemon{store: s.store, entity: e, state: st, work: w,
		interval: cfg.Interval, log: s.log, wake: make(chan struct{}, 1), held: &s.held, reserved: make(chan struct{}, 1),
		policy:      fault.Policy{Base: cfg.Interval, Max: max(cfg.RetryMax, cfg.Interval), Attempts: cfg.MaxAttempts, Budget: cfg.RetryBudget},
		stepTimeout: cfg.StepTimeout, jobTimeout: cfg.JobTimeout, claims: s.claims, shared: s.shared,
		sem: make(chan struct{}, max(cfg.Concurrency, 1)), next: func(to ingest.State) *daemon { return s.daemon(e, to) },
		share: depositorShare(max(cfg.Concurrency, 1), cfg.DepositorShare)})
}

// depositorShare is how many of a state's slots one depositor may hold:
// percent of them, at least one (0 or 100 and more: all).
func depositorShare(slots, percent int) int {
	if percent <= 0 || percent >= 100 {
		return slots
	}
	return max(1, slots*percent/100)
}

// SetGate has every daemon wait while gate is closed (a dependency down)
// and tell an outage from a failure of the batch or job.
func (s *Set) SetGate(gate *fault.Gate) {
	for _, d := range s.daemons {
		d.gate = gate
	}
}

// Wake has the daemon of state to of e look for work now.
func (s *Set) Wake(e ingest.Entity, to ingest.State) {
	if d := s.daemon(e, to); d != nil {
		d.notify()
	}
}

// daemon is the daemon of a state, or nil.
func (s *Set) daemon(e ingest.Entity, st ingest.State) *daemon {
	for _, d := range s.daemons {
		if d.entity == e && d.state == st {
			return d
		}
	}
	return nil
}

// Run runs every daemon until ctx ends (work in hand finishes first),
// then closes the claims' pool.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, d := range s.daemons {
		wg.Go(func() { d.run(ctx) })
	}
	wg.Wait()
	s.Close()
}

// Close releases the claims' connections (Run does it when it ends).
func (s *Set) Close() { s.claims.Close() }
