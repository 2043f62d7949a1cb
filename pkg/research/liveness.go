package research

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/config"
)

// ResearchersBucket is the bucket where live researchers keep their keys;
// a key not refreshed within cfg.LivenessTTL disappears. Its replicas
// follow the bus's (NATS_REPLICAS).
func ResearchersBucket(cfg Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      events.BucketResearchers,
		Description: "live researchers: each keeps its key fresh",
		TTL:         cfg.LivenessTTL,
		History:     1,
		Storage:     jetstream.FileStorage,
	}
}

// Researchers opens the researchers' bucket (bus.KeyValue: made by the
// deploy identity, or by the service where it manages the streams).
func Researchers(ctx context.Context, b *bus.Bus, cfg Config) (jetstream.KeyValue, error) {
	kv, err := b.KeyValue(ctx, ResearchersBucket(cfg))
	if err != nil {
		return nil, fmt.Errorf("researchers: %w", err)
	}
	return kv, nil
}

// Buckets are the buckets of the research services, from the process
// environment's research configuration: what `archivist migrate` makes
// as the deploy identity (service.Definition.Buckets).
func Buckets(ctx context.Context) ([]jetstream.KeyValueConfig, error) {
	var cfg Config
	if err := config.Load(ctx, &cfg, nil); err != nil {
		return nil, err
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return []jetstream.KeyValueConfig{ResearchersBucket(cfg)}, nil
}

// Announcement is what a researcher keeps in its key.
type Announcement struct {
	// ID names the researcher.
	ID string `json:"id"`
	// SeenAt is when it last announced itself.
	SeenAt time.Time `json:"seen_at"`
	// Busy is set while it holds a work item.
	Busy bool `json:"busy"`
	// Lease is the lease of the work item it holds: the pwa extends the
	// leases live researchers hold, so that a long episode analysed
	// slowly is not leased a second time.
	Lease string `json:"lease,omitempty"`
}

// Census counts the live researchers and those of them holding a work
// item (a key that cannot be read counts as live and idle).
func Census(ctx context.Context, kv jetstream.KeyValue) (live, busy int, err error) {
	c, err := TakeCensus(ctx, kv)
	return c.Live, c.Busy, err
}

// A CensusOf the researchers: how many are live, how many hold an item,
// and the leases they hold.
type CensusOf struct {
	Live, Busy int
	// Held are the leases of the items live researchers hold.
	Held []string
}

// TakeCensus reads every live researcher's announcement.
func TakeCensus(ctx context.Context, kv jetstream.KeyValue) (CensusOf, error) {
	var c CensusOf
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return c, fmt.Errorf("list researchers: %w", err)
	}
	defer lister.Stop()
	seen := map[string]bool{}
	for k := range lister.Keys() {
		seen[k] = true
	}
	for k := range seen {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // gone meanwhile, or unreadable: idle
		}
		var a Announcement
		if json.Unmarshal(e.Value(), &a) == nil && a.Busy {
			c.Busy++
			if a.Lease != "" {
				c.Held = append(c.Held, a.Lease)
			}
		}
	}
	c.Live = len(seen)
	return c, nil
}
