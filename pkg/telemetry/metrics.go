package telemetry

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg, or returns the collector already
// registered under its name and labels (a second bus, or an API served
// again, in the same process shares the first's metrics instead of
// failing).
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
