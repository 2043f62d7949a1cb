package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/devkit/minioserver"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/services/archivist/all"
	"github.com/archivist/archivist/services/archivist/dev"
)

func devCmd(ctx context.Context) *cobra.Command {
	// The flags' defaults are the environment's (ARCHIVIST_*): read here,
	// so that --help shows them; a malformed variable fails the run, not
	// the help.
	var o dev.Options
	loadErr := config.Load(ctx, &o, nil)
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system in one process",
		Long: `Run the whole system in one process: embedded NATS (JetStream), a private
PostgreSQL under the data dir unless DATABASE_URL is set, a local blob
store, and every service. --demo seeds a little of everything (research,
a batch, WARC files) once it is ready.` + env("ARCHIVIST_* (each flag's), DATABASE_URL, and every service's variables (README)"),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if loadErr != nil {
				return loadErr
			}
			log, err := logging.FromEnv(c.Context(), c.ErrOrStderr())
			if err != nil {
				return err
			}
			shutdown, err := telemetry.Setup(c.Context(), "archivist")
			if err != nil {
				return err
			}
			defer shutdown(context.WithoutCancel(c.Context()))
			return dev.Run(c.Context(), o, all.Services(), log, c.OutOrStdout())
		},
	}
	f := c.Flags()
	f.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory for NATS, PostgreSQL and blob data (ARCHIVIST_DATA_DIR)")
	f.IntVar(&o.NATSPort, "nats-port", o.NATSPort, "NATS client port (ARCHIVIST_NATS_PORT)")
	f.IntVar(&o.NATSMonitorPort, "nats-monitor-port", o.NATSMonitorPort, "NATS monitoring port, 0 to disable (ARCHIVIST_NATS_MONITOR_PORT)")
	f.IntVar(&o.PGPort, "pg-port", o.PGPort, "private PostgreSQL port (ARCHIVIST_PG_PORT)")
	f.StringVar(&o.AdminAddr, "admin-addr", o.AdminAddr, "admin server address (ADMIN_ADDR)")
	f.StringVar(&o.CuratorAddr, "curator-addr", o.CuratorAddr, "curation API address (CURATOR_HTTP_ADDR)")
	f.StringVar(&o.PWAAddr, "pwa-addr", o.PWAAddr, "research status API address (PWA_HTTP_ADDR)")
	f.StringVar(&o.AuditorAddr, "auditor-addr", o.AuditorAddr, "audit API address (AUDITOR_HTTP_ADDR)")
	f.StringVar(&o.IndexerAddr, "indexer-addr", o.IndexerAddr, "index API address (INDEXER_HTTP_ADDR)")
	f.StringVar(&o.AggregatorAddr, "aggregator-addr", o.AggregatorAddr, "CDX query API address (AGGREGATOR_HTTP_ADDR)")
	f.StringVar(&o.DashboardAddr, "dashboard-addr", o.DashboardAddr, "the operator's dashboard address (DASHBOARD_HTTP_ADDR)")
	f.BoolVar(&o.Demo, "demo", o.Demo, "seed demo data once ready: episodes and jingles, a batch, WARC files (ARCHIVIST_DEMO)")
	f.BoolVar(&o.MinIO, "minio", o.MinIO, "keep the blobs in a MinIO server (built with "+minioserver.Install+"): the archive and its second copy, which the auditor writes and repairs from (ARCHIVIST_DEV_MINIO)")
	return c
}

func migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Run every service's migrations",
		Long:  "Run every service's migrations against DATABASE_URL." + env("DATABASE_URL (and the other DATABASE_* variables)"),
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var common service.Common
			if err := config.Load(c.Context(), &common, nil); err != nil {
				return err
			}
			log, err := logging.FromEnv(c.Context(), c.ErrOrStderr())
			if err != nil {
				return err
			}
			return service.Migrate(c.Context(), all.Services(), common, log)
		},
	}
}
