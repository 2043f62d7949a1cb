package research

import (
	"context"
	"fmt"

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

// CountLive counts the researchers whose keys are live.
func CountLive(ctx context.Context, kv jetstream.KeyValue) (int, error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("list researchers: %w", err)
	}
	defer lister.Stop()
	seen := map[string]bool{} // a listing may repeat a key that is being refreshed
	for k := range lister.Keys() {
		seen[k] = true
	}
	return len(seen), nil
}
