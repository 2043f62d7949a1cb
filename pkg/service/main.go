package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/telemetry"
)

// Version is stamped in at build time with
// -ldflags "-X github.com/archivist/archivist/pkg/service.Version=v1.2.3".
var Version = "dev"

// Main is a service binary's main: `<service>` (or `<service> serve`) runs
// it until SIGTERM or SIGINT, `<service> migrate` runs its migrations and
// exits, `<service> version` prints the version.
func Main(def Definition) {
	if err := run(def, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", def.Name, err)
		os.Exit(1)
	}
}

func run(def Definition, args []string, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	// Help and version need no configuration.
	switch cmd {
	case "version", "--version", "-version":
		fmt.Println(def.Name, Version)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Printf("usage: %s [serve|migrate|healthcheck|writable DIR...|version]\n\n%s\n\nConfiguration: environment variables (the README's table). Exit status: 0 done, 1 an error, said on standard error.\n", def.Name, def.Summary)
		return nil
	case "writable":
		return Writable(args[1:]...)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log, err := logging.FromEnv(ctx, stderr)
	if err != nil {
		return err
	}
	var common Common
	if err := config.Load(ctx, &common, nil); err != nil {
		return err
	}
	switch cmd {
	case "serve":
		shutdown, err := telemetry.Setup(ctx, def.Name)
		if err != nil {
			return err
		}
		defer shutdown(context.WithoutCancel(ctx))
		return Serve(ctx, []Definition{def}, common, Deps{Log: log})
	case "healthcheck":
		return Healthcheck(ctx, common.AdminAddr)
	case "migrate":
		return Migrate(ctx, []Definition{def}, common, log)
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate, healthcheck or version)", cmd)
	}
}

// MigrateNATS creates or updates every stream, and every bucket the
// definitions declare, connected with cfg: the deploy identity's part of a
// migration.
func MigrateNATS(ctx context.Context, defs []Definition, cfg bus.Config, log *slog.Logger) error {
	b, err := bus.Connect(ctx, cfg, "migrate", bus.WithLogger(log))
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	if err := b.EnsureStreams(ctx); err != nil {
		return err
	}
	log.InfoContext(ctx, "streams created or updated")
	made := map[string]bool{}
	for _, d := range defs {
		if d.Buckets == nil {
			continue
		}
		buckets, err := d.Buckets(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		for _, kv := range buckets {
			if made[kv.Bucket] {
				continue
			}
			if _, err := b.EnsureKeyValue(ctx, kv); err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
			made[kv.Bucket] = true
			log.InfoContext(ctx, "bucket created or updated", "bucket", kv.Bucket, "ttl", kv.TTL)
		}
	}
	return nil
}

// Healthcheck asks the admin server at addr (ADMIN_ADDR) whether the
// service is ready: the check of a container image that has no shell or
// HTTP client (`<service> healthcheck` in compose's healthcheck).
func Healthcheck(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ADMIN_ADDR %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s", strings.TrimSpace(string(body)))
	}
	return nil
}

// errNoRole: a runtime role that does not exist (yet: CloudNativePG makes
// the Cluster's managed roles after the cluster starts).
var errNoRole = errors.New("runtime role does not exist")

// Migrate runs the migrations of every definition as the connecting
// (migration) role, then grants each service's runtime role, a role named
// like the service if one exists, the use of its own schemas and nothing
// else. Connected to NATS as the deploy user, it also creates or updates
// the streams and buckets, which the services' users may not (MigrateNATS).
//
// Within common.MigrateWait it tries again, backing off, while PostgreSQL
// or NATS does not answer (an outage or a network failure in the failure
// model) or a required runtime role is missing; any other failure, a
// migration's own among them, ends it at once.
func Migrate(ctx context.Context, defs []Definition, common Common, log *slog.Logger) error {
	deadline := time.Now().Add(common.MigrateWait)
	wait := fault.Policy{Base: time.Second, Max: 15 * time.Second}
	for attempt := 1; ; attempt++ {
		err := migrateOnce(ctx, defs, common, log)
		if err == nil || common.MigrateWait <= 0 {
			return err
		}
		if !fault.IsOutage(err) && !fault.IsNetwork(err) && !errors.Is(err, errNoRole) {
			return err
		}
		d := wait.Delay(attempt)
		if time.Now().Add(d).After(deadline) {
			return fmt.Errorf("waited %s (MIGRATE_WAIT) over %d attempts: %w", common.MigrateWait, attempt, err)
		}
		log.WarnContext(ctx, "migrate: waiting for PostgreSQL, NATS or a runtime role", "attempt", attempt, "retry_in", d, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

func migrateOnce(ctx context.Context, defs []Definition, common Common, log *slog.Logger) error {
	if common.Bus.User == "deploy" {
		if err := MigrateNATS(ctx, defs, common.Bus, log); err != nil {
			return err
		}
	}
	pool, err := store.Open(ctx, common.Store, "migrate")
	if err != nil {
		return err
	}
	defer pool.Close()
	done := map[string]bool{}
	for _, d := range defs {
		for _, s := range d.Schemas {
			if !done[s.ID()] {
				if err := store.Migrate(ctx, pool, s); err != nil {
					return err
				}
				v, _ := store.Version(ctx, pool, s)
				if latest, err := store.Latest(s); err == nil && v > latest {
					// A rollback: the newer release's migrations stay,
					// written so that this one runs on them.
					log.WarnContext(ctx, "schema newer than this build (a rolled-back release?): left as it is", "schema", s.ID(), "version", v, "build", latest)
				} else {
					log.InfoContext(ctx, "schema migrated", "schema", s.ID(), "version", v)
				}
				done[s.ID()] = true
			}
			granted, err := store.GrantRuntime(ctx, pool, s, d.Name)
			if err != nil {
				return err
			}
			switch {
			case granted:
				log.InfoContext(ctx, "runtime role granted its schema", "role", d.Name, "schema", s.Name)
			case common.RequireRoles:
				return fmt.Errorf("runtime role %s does not exist: its service could not use schema %s (create the role: the Cluster's managed roles; MIGRATE_REQUIRE_ROLES): %w", d.Name, s.Name, errNoRole)
			default:
				log.WarnContext(ctx, "no runtime role to grant; the service logs in as another role", "role", d.Name, "schema", s.Name)
			}
		}
	}
	return nil
}

// Serve starts the admin server (unless deps has one) and the definitions in
// order, runs until ctx ends or a service fails, then stops them in reverse
// order within common.ShutdownTimeout.
func Serve(ctx context.Context, defs []Definition, common Common, deps Deps) (err error) {
	log := deps.Log
	if deps.Admin == nil {
		admin, err := NewAdmin(common.AdminAddr, log)
		if err != nil {
			return err
		}
		deps.Admin = admin
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), common.ShutdownTimeout)
			defer cancel()
			err = errors.Join(err, admin.Close(sctx))
		}()
		log.InfoContext(ctx, "admin server listening", "addr", admin.Addr())
	}
	log.InfoContext(ctx, "configuration", config.LogAttrs(&common)...)
	var running []*Running
	stopAll := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), common.ShutdownTimeout)
		defer cancel()
		deps.Admin.ShuttingDown()
		var errs []error
		for i := len(running) - 1; i >= 0; i-- {
			errs = append(errs, running[i].Stop(sctx))
		}
		return errors.Join(errs...)
	}
	// Every service is pending before the first starts: /readyz must not
	// pass while the later ones have not begun.
	for _, d := range defs {
		deps.Admin.Starting(d.Name)
	}
	failed := make(chan error, len(defs))
	for _, d := range defs {
		r, err := Start(ctx, d, common, deps)
		if err != nil {
			return errors.Join(err, stopAll())
		}
		running = append(running, r)
		go func() {
			<-r.Done()
			if ctx.Err() == nil {
				failed <- fmt.Errorf("%s stopped on its own: %w", d.Name, r.Err())
			}
		}()
	}
	select {
	case <-ctx.Done():
		log.InfoContext(ctx, "shutting down")
		return stopAll()
	case err := <-failed:
		log.ErrorContext(ctx, "service failed; shutting down", "err", err)
		return errors.Join(err, stopAll())
	}
}

// Writable checks that this process may create, write and remove a file
// in each of dirs: a pod's init check of its working area (a volume whose
// owner or fsGroup does not let the service's user in fails here, saying
// so, and not later in the middle of a job). `<service> writable DIR...`.
func Writable(dirs ...string) error {
	if len(dirs) == 0 {
		return errors.New("writable: name the directories to check")
	}
	for _, dir := range dirs {
		f, err := os.CreateTemp(dir, ".archivist-writable-*")
		if err == nil {
			_, err = f.Write([]byte{0})
			if serr := f.Sync(); err == nil {
				err = serr
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if rerr := os.Remove(f.Name()); err == nil {
				err = rerr
			}
		}
		if err != nil {
			groups, _ := os.Getgroups()
			return fmt.Errorf("%s is not writable by uid %d, gid %d, groups %v: %w (the volume's owner and mode, or the pod's fsGroup, must let this user write: docs/DEPLOY.md, \"The ingest working area\")",
				dir, os.Getuid(), os.Getgid(), groups, err)
		}
	}
	return nil
}
