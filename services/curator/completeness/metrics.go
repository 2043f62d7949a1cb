package completeness

import "github.com/prometheus/client_golang/prometheus"

// metrics are the checker's: counters as it goes, gauges at each pass's end.
type metrics struct {
	violations, healed                *prometheus.CounterVec
	records, placed, refused          *prometheus.GaugeVec
	passViolations, unhealed, passEnd *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archivist_curator_invariant_violations_total",
			Help: "Records found breaking curation's promise (in exactly one work, no older than its graph), by kind and check."}, []string{"kind", "check"}),
		healed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archivist_curator_invariant_healed_total",
			Help: "Records matched again by the invariant's check to heal a violation, by kind."}, []string{"kind"}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archivist_curator_invariant_records",
			Help: "Source records, by kind and source, at the end of the last pass of the invariant's check."}, []string{"kind", "source"}),
		placed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archivist_curator_invariant_placed",
			Help: "Source records found in exactly one current work, by kind and source, in the last pass (records less placed: in flight or broken)."}, []string{"kind", "source"}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archivist_curator_invariant_refused_links",
			Help: "Same-as links refused by the matcher, by kind and the linking record's source, at the end of the last pass."}, []string{"kind", "source"}),
		passViolations: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archivist_curator_invariant_pass_violations",
			Help: "Violations the last finished pass found (each healed), by kind."}, []string{"kind"}),
		unhealed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archivist_curator_invariant_unhealed",
			Help: "Violations the last finished pass found of records healed in the pass before: healing does not converge on them."}, []string{"kind"}),
		passEnd: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archivist_curator_invariant_pass_end_timestamp_seconds",
			Help: "When the invariant's check last finished a pass over every record and work, by kind."}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.violations, m.healed, m.records, m.placed, m.refused, m.passViolations, m.unhealed, m.passEnd)
	}
	return m
}
