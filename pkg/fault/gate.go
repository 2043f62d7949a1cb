package fault

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Probe checks one dependency of a service.
type Probe struct {
	// Name is the dependency's (Postgres, NATS, BlobStore).
	Name string
	// Check returns nil while the dependency answers.
	Check func(ctx context.Context) error
}

// Gate is what a service's consumers and daemons ask before they take work:
// while one of its dependencies is down, Wait blocks (probing every
// Interval), so that nothing is claimed, fetched or handed out only to fail
// for a cause that is not the work's. A daemon that meets a failure tells
// the gate (Observe), which probes at once.
type Gate struct {
	log *slog.Logger
	// Interval is how often a closed gate probes (default 1 s).
	Interval time.Duration

	mu     sync.Mutex
	probes []Probe
	down   error         // the outage that closed the gate, or nil
	opened chan struct{} // closed when the gate opens again
}

// NewGate returns an open gate over probes (more may be added with Add).
func NewGate(log *slog.Logger, probes ...Probe) *Gate {
	if log == nil {
		log = slog.Default()
	}
	return &Gate{log: log, Interval: time.Second, probes: probes}
}

// Add adds a probe.
func (g *Gate) Add(p Probe) {
	g.mu.Lock()
	g.probes = append(g.probes, p)
	g.mu.Unlock()
}

// Check probes every dependency (each within 5 s) and returns the first
// failure as an Outage naming it, or nil.
func (g *Gate) Check(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	probes := g.probes
	g.mu.Unlock()
	for _, p := range probes {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.Check(cctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if IsOutage(err) {
				return err // it says what is out already
			}
			return Outage(p.Name, err)
		}
	}
	return nil
}

// Down returns the outage that closed the gate, or nil while it is open.
func (g *Gate) Down() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.down
}

// Observe is told of a failure a daemon met: it probes the dependencies
// and, if one is down, closes the gate and reports true (the failure was
// the outage's, not the work's: count nothing against the work). A
// permanent failure is never an outage.
func (g *Gate) Observe(ctx context.Context, err error) bool {
	if g == nil || err == nil || IsPermanent(err) || ctx.Err() != nil {
		return false
	}
	if g.Down() != nil {
		return true
	}
	cerr := g.Check(ctx)
	if cerr == nil || ctx.Err() != nil {
		return false
	}
	g.close(cerr)
	return true
}

func (g *Gate) close(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down != nil {
		return
	}
	g.down, g.opened = cause, make(chan struct{})
	g.log.Warn("dependency down: pausing, no work is taken until it answers", "dependency", DependencyOf(cause), "cause", cause)
	go g.watch(g.opened)
}

// watch probes until every dependency answers, then opens the gate.
func (g *Gate) watch(opened chan struct{}) {
	t := time.NewTicker(max(g.Interval, 10*time.Millisecond))
	defer t.Stop()
	since := time.Now()
	for range t.C {
		if g.Check(context.Background()) != nil {
			continue
		}
		// Logged before the gate opens, so that the line is written before
		// any waiter goes on (a test's logger is gone once it returns).
		g.log.Info("dependencies answer again: resuming", "paused_for", time.Since(since).Round(time.Millisecond))
		g.mu.Lock()
		g.down = nil
		close(opened)
		g.mu.Unlock()
		return
	}
}

// Wait returns at once while the gate is open; while it is closed it
// blocks until the gate opens or ctx ends (then ctx's error).
func (g *Gate) Wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	down, opened := g.down, g.opened
	g.mu.Unlock()
	if down == nil {
		return nil
	}
	select {
	case <-opened:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
