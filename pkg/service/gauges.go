package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge is a family of gauges whose values are read (from the database,
// from JetStream) when Prometheus scrapes: the backlogs operators scale and
// alert on.
type Gauge struct {
	// Name and Help as Prometheus wants them.
	Name, Help string
	// Labels are the family's label names (none for a single gauge).
	Labels []string
}

// Reading is one gauge of a family: its label values, in the family's
// label order, and its value.
type Reading struct {
	Labels []string
	Value  float64
}

// Read is a reading of value with label values (in the family's order).
func Read(value float64, labels ...string) Reading { return Reading{Labels: labels, Value: value} }

// Readings are the values read, by family name.
type Readings map[string][]Reading

// gaugeCacheFor is how long a reading serves scrapes (several Prometheus
// replicas, a KEDA poll) before it is read again.
const gaugeCacheFor = 5 * time.Second

// ReadGauges registers the gauges with reg: at a scrape, read is called (at
// most every few seconds, within a few seconds' time) and its readings
// exported; a failed read exports the last good one and is logged.
func ReadGauges(reg prometheus.Registerer, log *slog.Logger, gauges []Gauge, read func(context.Context) (Readings, error)) {
	c := &gaugeCollector{read: read, log: log, descs: map[string]*prometheus.Desc{}}
	for _, g := range gauges {
		c.descs[g.Name] = prometheus.NewDesc(g.Name, g.Help, g.Labels, nil)
	}
	reg.MustRegister(c)
}

// ReadGauges registers gauges with the service's metrics (see ReadGauges).
func (e *Env) ReadGauges(gauges []Gauge, read func(context.Context) (Readings, error)) {
	ReadGauges(e.Metrics, e.Log, gauges, read)
}

type gaugeCollector struct {
	read  func(context.Context) (Readings, error)
	log   *slog.Logger
	descs map[string]*prometheus.Desc

	mu   sync.Mutex
	last Readings
	at   time.Time
}

func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.at.IsZero() || time.Since(c.at) >= gaugeCacheFor {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := c.read(ctx)
		cancel()
		if err != nil {
			c.log.WarnContext(ctx, "reading the backlog gauges", "err", err)
		} else {
			c.last, c.at = r, time.Now()
		}
	}
	last := c.last
	c.mu.Unlock()
	for name, readings := range last {
		d, ok := c.descs[name]
		if !ok {
			continue
		}
		for _, r := range readings {
			if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, r.Value, r.Labels...); err == nil {
				ch <- m
			}
		}
	}
}
