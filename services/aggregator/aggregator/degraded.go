package aggregator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Degraded, not down: a cluster that cannot be read (its summary missing,
// a block corrupt, the store refusing it) is left out of a query, which
// answers from the others and says it is incomplete; the failure is
// logged, counted, and the clusters that failed recently are a gauge an
// alert watches (ArchivistIndexClusterUnreadable). One bad cluster no
// longer fails every query with a 500. A merge or an export still stops
// at the error: they must not write a partial index.

// view is how a query reads the index: for which access point (nil:
// staff's view), and the clusters it answered without.
type view struct {
	point    *point
	mu       sync.Mutex
	clusters []string
	// excl is the exclusion list as the query first read it: one look
	// at its version a query, however many windows and ranges it reads.
	excl *exclusions
}

type viewKey struct{}

// withView returns a context under which the index is read for access
// point p (nil: staff), and a cluster that cannot be read is left out and
// named in the returned view, not an error.
func withView(ctx context.Context, p *point) (context.Context, *view) {
	v := &view{point: p}
	return context.WithValue(ctx, viewKey{}, v), v
}

// viewOf is the view a context reads for (nil: none, an export or a
// merge: staff's view, and every error stands).
func viewOf(ctx context.Context) *view {
	v, _ := ctx.Value(viewKey{}).(*view)
	return v
}

// pointName is the view's access point ("": staff's, or none).
func (v *view) pointName() string {
	if v == nil || v.point == nil {
		return ""
	}
	return v.point.Name
}

// names are the clusters left out, sorted.
func (v *view) names() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(slices.Values(v.clusters))
}

// unreadableWindow is how long a cluster that failed a read counts in the
// unreadable clusters gauge.
const unreadableWindow = 10 * time.Minute

// unreadable notes that cluster name failed to read with err, and reports
// whether the caller may go on without it: under a query's view
// (withView), and while its own context is live, it may
// (the cluster is named in the answer); otherwise the error stands. Each
// cluster's failure is logged at most once a minute, and counted.
func (a *Aggregator) unreadable(ctx context.Context, name string, err error) bool {
	v := viewOf(ctx)
	if v == nil || ctx.Err() != nil {
		return false
	}
	v.mu.Lock()
	if !slices.Contains(v.clusters, name) {
		v.clusters = append(v.clusters, name)
	}
	v.mu.Unlock()
	a.readFailures.Inc()
	now := time.Now()
	a.failedMu.Lock()
	last, seen := a.failedAt[name]
	a.failedAt[name] = now
	a.failedMu.Unlock()
	if !seen || now.Sub(last) > time.Minute {
		a.log.ErrorContext(ctx, "an index cluster cannot be read: queries answer without it, marked incomplete", "cluster", name, "err", err)
	}
	return true
}

// unreadableClusters counts the clusters that failed a read within the
// window, forgetting older failures and clusters merged away.
func (a *Aggregator) unreadableClusters() int {
	a.failedMu.Lock()
	defer a.failedMu.Unlock()
	for name, at := range a.failedAt {
		if time.Since(at) > unreadableWindow {
			delete(a.failedAt, name)
		}
	}
	return len(a.failedAt)
}

// readFailuresCounter registers the counter of cluster read failures.
func readFailuresCounter(reg prometheus.Registerer) prometheus.Counter {
	return counter(reg, prometheus.CounterOpts{Name: "archivist_aggregator_cluster_read_failures_total",
		Help: "Reads of an index cluster that failed (its summary, location file or a block): the query answered without it, marked incomplete."})
}

// registerUnreadable registers the gauge of clusters unreadable lately.
func (a *Aggregator) registerUnreadable(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "archivist_aggregator_unreadable_clusters",
		Help: "Index clusters that failed a read in the last 10 minutes: queries answer without them, marked incomplete."},
		func() float64 { return float64(a.unreadableClusters()) }))
}
