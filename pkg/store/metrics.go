package store

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports a pgx pool's statistics at each scrape: its
// connections by state against its maximum, and how often and how long
// acquiring one waited (a pool too small for its load waits; one at its
// maximum with nothing idle is the service's bottleneck).
type PoolCollector struct {
	pool *pgxpool.Pool
}

// NewPoolCollector returns the collector of pool's statistics.
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector { return &PoolCollector{pool: pool} }

var (
	poolConns        = prometheus.NewDesc("archivist_db_pool_connections", "Connections of the PostgreSQL pool, by state (acquired, idle, constructing).", []string{"state"}, nil)
	poolMax          = prometheus.NewDesc("archivist_db_pool_max_connections", "The PostgreSQL pool's maximum (DATABASE_MAX_CONNS).", nil, nil)
	poolAcquires     = prometheus.NewDesc("archivist_db_pool_acquires_total", "Connections acquired from the PostgreSQL pool.", nil, nil)
	poolEmptyAcquire = prometheus.NewDesc("archivist_db_pool_empty_acquires_total", "Acquires that found no idle connection and waited for one.", nil, nil)
	poolWait         = prometheus.NewDesc("archivist_db_pool_acquire_wait_seconds_total", "Time spent acquiring connections from the PostgreSQL pool.", nil, nil)
	poolCanceled     = prometheus.NewDesc("archivist_db_pool_canceled_acquires_total", "Acquires given up (their context ended) before a connection came.", nil, nil)
)

// Describe sends the descriptions of the pool's metrics.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConns, poolMax, poolAcquires, poolEmptyAcquire, poolWait, poolCanceled} {
		ch <- d
	}
}

// Collect reads the pool's statistics.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmptyAcquire, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolWait, prometheus.CounterValue, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(poolCanceled, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
}
