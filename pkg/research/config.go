package research

import (
	"fmt"
	"time"

	"github.com/archivist/archivist/pkg/fault"
)

// Config is what the pwa, cwa and researchers must agree on.
type Config struct {
	// LeaseDuration is how long a lease lasts, and how far each result
	// extends it.
	LeaseDuration time.Duration `env:"RESEARCH_LEASE_DURATION, default=10m"`
	// ItemTTL is how long a work item waits in the queue; it must be shorter
	// than LeaseDuration so that items expire before their leases.
	ItemTTL time.Duration `env:"RESEARCH_ITEM_TTL, default=5m"`
	// MaxClips is the most clips one work item carries.
	MaxClips int `env:"RESEARCH_MAX_CLIPS, default=8"`
	// LivenessTTL is how long a researcher counts as live after its last
	// announcement.
	LivenessTTL time.Duration `env:"RESEARCH_LIVENESS_TTL, default=30s"`
	// RetryBase is the wait after an episode's or a pair's first failure;
	// it doubles with each further failure, at most RetryMax.
	RetryBase time.Duration `env:"RESEARCH_RETRY_BASE, default=1m"`
	// RetryMax caps the wait between failed attempts.
	RetryMax time.Duration `env:"RESEARCH_RETRY_MAX, default=1h"`
	// MaxAttempts parks an episode whose leases ended without its results
	// (its researcher crashed, hung or lost the item) this many times.
	MaxAttempts int `env:"RESEARCH_MAX_ATTEMPTS, default=5"`
	// MediaWait is how long media that is not in the store (yet), or
	// another fault that may pass, is retried before its pair or episode
	// is parked; media that arrives meanwhile is researched at once.
	MediaWait time.Duration `env:"RESEARCH_MEDIA_WAIT, default=24h"`
}

// crashPolicy bounds an episode whose leases end without results.
func (c Config) crashPolicy() fault.Policy {
	return fault.Policy{Base: c.RetryBase, Max: c.RetryMax, Attempts: max(c.MaxAttempts, 1)}
}

// waitPolicy bounds a failure that may pass (media missing, a transient
// fault): retried for MediaWait, at least three times.
func (c Config) waitPolicy() fault.Policy {
	return fault.Policy{Base: c.RetryBase, Max: c.RetryMax, Attempts: 3, Budget: c.MediaWait}
}

// Check fails on a configuration the spec forbids.
func (c Config) Check() error {
	switch {
	case c.ItemTTL < time.Second:
		return fmt.Errorf("RESEARCH_ITEM_TTL %s: JetStream's message TTL is at least 1s", c.ItemTTL)
	case c.ItemTTL >= c.LeaseDuration:
		return fmt.Errorf("RESEARCH_ITEM_TTL %s must be shorter than RESEARCH_LEASE_DURATION %s: work items must expire before their leases", c.ItemTTL, c.LeaseDuration)
	case c.MaxClips < 1:
		return fmt.Errorf("RESEARCH_MAX_CLIPS %d: at least 1", c.MaxClips)
	case c.LivenessTTL < time.Second:
		return fmt.Errorf("RESEARCH_LIVENESS_TTL %s: at least 1s", c.LivenessTTL)
	}
	return nil
}
