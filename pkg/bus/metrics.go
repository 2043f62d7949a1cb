package bus

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/pkg/telemetry"
)

// Outcomes of a consumed message, the "outcome" label of
// archivist_bus_messages_total.
const (
	outcomeAcked        = "acked"
	outcomeRetried      = "retried"
	outcomeDeadLettered = "dead_lettered"
)

type metrics struct {
	messages *prometheus.CounterVec
	handle   *prometheus.HistogramVec
	moved    prometheus.Counter
	pauses   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archivist_bus_messages_total",
			Help: "Messages consumed, by consumer and outcome (acked, retried, dead_lettered).",
		}, []string{"consumer", "outcome"}),
		handle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "archivist_bus_handle_seconds",
			Help:    "Time a handler took per message, by consumer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"consumer"}),
		moved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "archivist_bus_max_delivered_moved_total",
			Help: "Max-delivered messages moved to the dead-letter stream.",
		}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archivist_bus_consumer_pauses_total",
			Help: "Times a consumer paused because a dependency (PostgreSQL, the blob store) was down, by consumer.",
		}, []string{"consumer"}),
	}
	if reg != nil {
		m.messages = telemetry.Register(reg, m.messages)
		m.handle = telemetry.Register(reg, m.handle)
		m.moved = telemetry.Register(reg, m.moved)
		m.pauses = telemetry.Register(reg, m.pauses)
	}
	return m
}
