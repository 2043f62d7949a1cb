// Package store opens Archivist's PostgreSQL pool, runs each service's
// versioned migrations into the schema it owns, and runs transactions.
package store

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

// Config says how to reach PostgreSQL.
type Config struct {
	// URL is a PostgreSQL connection URL or DSN.
	URL string `env:"DATABASE_URL"`
	// MaxConns caps the pool (default 10).
	MaxConns int32 `env:"DATABASE_MAX_CONNS, default=10"`
}

// Open opens a pool and checks that the server answers.
func Open(ctx context.Context, cfg Config, appName string) (*pgxpool.Pool, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("DATABASE_URL is not set")
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if appName != "" {
		pc.ConnConfig.RuntimeParams["application_name"] = appName
	}
	// Every query a span, in the trace of the work that runs it.
	pc.ConnConfig.Tracer = otelpgx.NewTracer()
	// The server notices a client that vanished (a lost node, a cut
	// network) within about a minute, and ends its session: its
	// transactions roll back and its session locks (ingest's claims) go
	// with it, instead of the hours of the kernel's default keepalive.
	// Ignored on unix sockets; a URL's own values win.
	for k, v := range map[string]string{"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10",
		"tcp_keepalives_count": "3", "tcp_user_timeout": "60000"} {
		if _, set := pc.ConnConfig.RuntimeParams[k]; !set {
			pc.ConnConfig.RuntimeParams[k] = v
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database %s@%s: %w", pc.ConnConfig.User, pc.ConnConfig.Host, err)
	}
	return pool, nil
}

// busyPoolWait is how long Ping waits for a connection of the pool before
// it asks on one of its own.
const busyPoolWait = 500 * time.Millisecond

// Ping reports whether PostgreSQL answers, for a service's dependency
// probe and its readiness. A pool whose every connection is busy with work
// is not an outage: Ping waits briefly for one of the pool's connections
// and, when none comes free, asks on a connection of its own (closed at
// once). pgxpool's own Ping waits for the pool, and so called a busy
// service's database down, pausing its consumers and failing its
// readiness.
func Ping(ctx context.Context, pool *pgxpool.Pool) error {
	actx, cancel := context.WithTimeout(ctx, busyPoolWait)
	conn, err := pool.Acquire(actx)
	cancel()
	if err == nil {
		defer conn.Release()
		return conn.Ping(ctx)
	}
	if ctx.Err() != nil || actx.Err() == nil {
		return err // the caller's end, or the pool could not connect
	}
	own, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = own.Close(cctx)
	}()
	return own.Ping(ctx)
}

// Schema is a PostgreSQL schema a service owns, with the migrations that
// build it. Migration files are tern's: NNN_name.sql, with an optional
// "---- create above / drop below ----" line before the down migration.
// They name their tables schema-qualified.
type Schema struct {
	// Name of the schema, e.g. "curator".
	Name string
	// Migrations holds the *.sql files. They are text/template templates
	// with {{.schema}}, the schema's quoted name: a part shared by many
	// schemas (the work kit's) names its tables with it.
	Migrations fs.FS
	// Part, when set, names a second set of migrations in the same schema
	// (its tables beside the schema's own), versioned apart in
	// <schema>.<part>_schema_version: what a shared package (pkg/work)
	// adds to every schema that uses it.
	Part string
	// Parts are the other sets of migrations of the schema (each with its
	// Part), migrated after the schema's own: a shared package's tables.
	Parts []Schema
}

// WithParts is s and its parts, each to be at its newest version.
func (s Schema) WithParts() []Schema { return append([]Schema{s}, s.Parts...) }

// ID names s among a service's schemas: its name, and its part if it has
// one (curator, curator/work).
func (s Schema) ID() string {
	if s.Part == "" {
		return s.Name
	}
	return s.Name + "/" + s.Part
}

// versionTable is the table that holds s's version.
func (s Schema) versionTable() string {
	if s.Part == "" {
		return pgx.Identifier{s.Name, "schema_version"}.Sanitize()
	}
	return pgx.Identifier{s.Name, s.Part + "_schema_version"}.Sanitize()
}

// Migrate brings schema s up to its newest migration, then each of its
// Parts. It holds an advisory lock for the schema meanwhile, so replicas
// that start together migrate once. The version is kept in
// <schema>.schema_version (a part's in <schema>.<part>_schema_version).
func Migrate(ctx context.Context, pool *pgxpool.Pool, s Schema) error {
	if err := migrate1(ctx, pool, s); err != nil {
		return err
	}
	for _, p := range s.Parts {
		if err := migrate1(ctx, pool, p); err != nil {
			return err
		}
	}
	return nil
}

// migrate1 migrates s's own migrations.
func migrate1(ctx context.Context, pool *pgxpool.Pool, s Schema) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: acquire connection: %w", s.Name, err)
	}
	defer conn.Release()
	pc := conn.Conn()
	lock := "archivist.migrate." + s.ID()
	if _, err := pc.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", lock); err != nil {
		return fmt.Errorf("migrate %s: take advisory lock: %w", s.Name, err)
	}
	defer func() {
		// Unlock on a fresh context: ctx may be done, and a lock left behind on
		// a pooled connection would block the next migration.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := pc.Exec(uctx, "SELECT pg_advisory_unlock(hashtext($1))", lock); err != nil {
			conn.Conn().Close(uctx)
		}
	}()
	if _, err := pc.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s.Name}.Sanitize()); err != nil {
		return fmt.Errorf("migrate %s: create schema: %w", s.Name, err)
	}
	m, err := migrate.NewMigrator(ctx, pc, s.versionTable())
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.ID(), err)
	}
	m.Data["schema"] = pgx.Identifier{s.Name}.Sanitize()
	if err := m.LoadMigrations(s.Migrations); err != nil {
		return fmt.Errorf("migrate %s: load migrations: %w", s.ID(), err)
	}
	// A schema newer than this build (a release rolled back after its
	// migrations ran) is left as it is: the migrations are written to
	// expand first, so the previous release runs on it, and a migrate
	// that failed here failed the rollback. Version and Latest tell it.
	if cur, err := m.GetCurrentVersion(ctx); err != nil {
		return fmt.Errorf("migrate %s: read its version: %w", s.ID(), err)
	} else if cur > int32(len(m.Migrations)) {
		return nil
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", s.ID(), err)
	}
	return nil
}

// Version returns the schema's current migration version.
func Version(ctx context.Context, pool *pgxpool.Pool, s Schema) (int32, error) {
	var v int32
	err := pool.QueryRow(ctx, "SELECT version FROM "+s.versionTable()).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read %s schema version: %w", s.ID(), err)
	}
	return v, nil
}

// Latest is the newest migration of s: the schema version this build
// needs.
func Latest(s Schema) (int32, error) {
	entries, err := fs.ReadDir(s.Migrations, ".")
	if err != nil {
		return 0, fmt.Errorf("migrations of %s: %w", s.Name, err)
	}
	var latest int32
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 32)
		if err != nil {
			continue
		}
		latest = max(latest, int32(n))
	}
	return latest, nil
}

// InTx runs fn in a transaction: committed if fn returns nil, rolled back
// otherwise (and if fn panics).
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

// GrantRuntime lets role use schema s: read and write its tables and
// sequences, but not change the schema (no DDL; the migration role owns it).
// A role that does not exist is skipped and reported as false: outside a
// deployment with per-service roles, every service uses one login.
func GrantRuntime(ctx context.Context, pool *pgxpool.Pool, s Schema, role string) (bool, error) {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up role %s: %w", role, err)
	}
	if !exists {
		return false, nil
	}
	sch, r := pgx.Identifier{s.Name}.Sanitize(), pgx.Identifier{role}.Sanitize()
	for _, q := range []string{
		"GRANT USAGE ON SCHEMA " + sch + " TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + sch + " TO " + r,
		"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA " + sch + " TO " + r,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return false, fmt.Errorf("grant %s on %s: %w", role, s.Name, err)
		}
	}
	return true, nil
}
