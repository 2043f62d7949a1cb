// Package curator is the curator service: it keeps the episodes and clips
// that other systems curate (from JetStream and over HTTP), versioned by the
// send time of the event that described them.
package curator

import (
	"context"
	"errors"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/migrations"
)

// Config is the curator's own configuration.
type Config struct {
	// HTTPAddr is where the curation API listens.
	HTTPAddr string `env:"CURATOR_HTTP_ADDR, default=:8080"`
	// Concurrency is how many curation events are stored at once per consumer.
	Concurrency int `env:"CURATOR_CONCURRENCY, default=8"`
}

// Definition is the curator service.
func Definition() service.Definition {
	return service.Definition{
		Name:      "curator",
		Summary:   "stores curated episodes and clips from curation events (NATS and HTTP), newest version wins",
		Schemas:   []store.Schema{migrations.Schema},
		NeedsDB:   true,
		NeedsBus:  true,
		NeedsBlob: false,
		Run:       run,
	}
}

func run(ctx context.Context, env *service.Env) error {
	var cfg Config
	if err := env.LoadConfig(ctx, &cfg); err != nil {
		return err
	}
	cat := catalog.New(env.DB, env.Metrics, env.Log)
	h := Handlers{Catalog: cat}
	episodes, err := bus.Consume(ctx, env.Bus, events.CuratorEpisodes, h.Episode, bus.WithConcurrency(cfg.Concurrency))
	if err != nil {
		return err
	}
	clips, err := bus.Consume(ctx, env.Bus, events.CuratorClips, h.Clip, bus.WithConcurrency(cfg.Concurrency))
	if err != nil {
		return errors.Join(err, episodes.Stop(context.Background()))
	}
	srv := api.New(env.Bus, cat, env.Log)
	err = api.Serve(ctx, cfg.HTTPAddr, srv.Handler(), env.ShutdownTimeout, func(addr string) {
		env.Log.Info("curation API listening", "addr", addr)
		env.Ready()
	})
	sctx, cancel := context.WithTimeout(context.Background(), env.ShutdownTimeout)
	defer cancel()
	return errors.Join(err, episodes.Stop(sctx), clips.Stop(sctx))
}

// Handlers store curation events in the catalog.
type Handlers struct {
	// Catalog is where records are stored.
	Catalog *catalog.Catalog
}

// Episode stores an EpisodeUpserted event.
func (h Handlers) Episode(ctx context.Context, m *bus.Message[events.EpisodeUpserted]) error {
	_, err := h.Catalog.Upsert(ctx, catalog.FromEpisode(m.Envelope, m.Event))
	return err
}

// Clip stores a ClipUpserted event.
func (h Handlers) Clip(ctx context.Context, m *bus.Message[events.ClipUpserted]) error {
	_, err := h.Catalog.Upsert(ctx, catalog.FromClip(m.Envelope, m.Event))
	return err
}
