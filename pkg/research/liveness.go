package research

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
)

// Researchers opens (creating or updating) the bucket where live
// researchers keep their keys; a key not refreshed within ttl disappears.
func Researchers(ctx context.Context, js jetstream.JetStream, ttl Config) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      events.BucketResearchers,
		Description: "live researchers: each keeps its key fresh",
		TTL:         ttl.LivenessTTL,
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("researchers bucket: %w", err)
	}
	return kv, nil
}

// Announcement is what a researcher keeps in its key.
type Announcement struct {
	// ID names the researcher.
	ID string `json:"id"`
	// SeenAt is when it last announced itself.
	SeenAt time.Time `json:"seen_at"`
	// Busy is set while it holds a work item.
	Busy bool `json:"busy"`
}

// Census counts the live researchers and those of them holding a work
// item (a key that cannot be read counts as live and idle).
func Census(ctx context.Context, kv jetstream.KeyValue) (live, busy int, err error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("list researchers: %w", err)
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
			busy++
		}
	}
	return len(seen), busy, nil
}
