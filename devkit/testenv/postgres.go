package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/pgcluster"
	"github.com/archivist/archivist/pkg/store"
)

var (
	pgMu        sync.Mutex
	pgCluster   *pgcluster.Cluster
	pgTmpDir    string
	pgAdminURL  string
	pgAdminDB   string
	pgTemplates = map[string]string{}
	pgSeq       atomic.Int64
)

// postgresURL returns the URL of a database on the test server to run
// CREATE DATABASE from: DATABASE_URL if set, else the process's throwaway
// cluster, created on first use.
func postgresURL(t testing.TB) (string, error) {
	if pgAdminURL != "" {
		return pgAdminURL, nil
	}
	if u := os.Getenv("DATABASE_URL"); u != "" {
		pgAdminURL = u
		return u, nil
	}
	dir, err := os.MkdirTemp("", "archivist-pg-")
	if err != nil {
		return "", fmt.Errorf("temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	c := &pgcluster.Cluster{Dir: dir + "/data", SocketDir: dir + "/sock"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Init(ctx); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := c.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	pgCluster, pgTmpDir = c, dir
	pgAdminURL = c.URL("postgres")
	return pgAdminURL, nil
}

// DB returns a pool on a database of the test's own, in which schemas have
// been migrated, and drops the database when the test ends. The migrated
// state is built once per process as a template and cloned per test.
func DB(t testing.TB, schemas ...store.Schema) *pgxpool.Pool {
	t.Helper()
	url := DBURL(t, schemas...)
	pool, err := store.Open(context.Background(), store.Config{URL: url, MaxConns: 20}, "test")
	if err != nil {
		t.Fatalf("testenv: open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// DBURL is DB's database as a URL, for code that opens its own pool.
func DBURL(t testing.TB, schemas ...store.Schema) string {
	t.Helper()
	ctx := context.Background()
	pgMu.Lock()
	defer pgMu.Unlock()
	admin, err := postgresURL(t)
	if err != nil {
		t.Fatalf("testenv: PostgreSQL is needed and could not be started: %v", err)
	}
	tmpl, err := template(ctx, admin, schemas)
	if err != nil {
		t.Fatalf("testenv: template database: %v", err)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), pgSeq.Add(1))
	if err := adminExec(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		t.Fatalf("testenv: create test database: %v", err)
	}
	t.Cleanup(func() {
		pgMu.Lock()
		defer pgMu.Unlock()
		_ = adminExec(context.Background(), admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDatabase(admin, name)
}

// template returns the name of a database migrated with schemas, creating
// it on first use.
func template(ctx context.Context, admin string, schemas []store.Schema) (string, error) {
	names := make([]string, len(schemas))
	for i, s := range schemas {
		names[i] = s.ID()
	}
	key := strings.Join(names, ",")
	if tmpl, ok := pgTemplates[key]; ok {
		return tmpl, nil
	}
	tmpl := fmt.Sprintf("tmpl_%d_%d", os.Getpid(), len(pgTemplates))
	if err := adminExec(ctx, admin, "CREATE DATABASE "+tmpl); err != nil {
		return "", err
	}
	pool, err := store.Open(ctx, store.Config{URL: withDatabase(admin, tmpl), MaxConns: 2}, "testenv-migrate")
	if err != nil {
		return "", err
	}
	for _, s := range schemas {
		if err := store.Migrate(ctx, pool, s); err != nil {
			pool.Close()
			return "", err
		}
	}
	pool.Close()
	pgTemplates[key] = tmpl
	return tmpl, nil
}

func adminExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// withDatabase replaces the database of a connection URL (or appends
// dbname to a key=value DSN).
func withDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn + " dbname=" + db
	}
	u.Path = "/" + db
	return u.String()
}

func shutdownPostgres() {
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgCluster != nil {
		_ = pgCluster.Stop()
		os.RemoveAll(pgTmpDir)
		pgCluster = nil
	} else if pgAdminURL != "" {
		ctx := context.Background()
		for _, tmpl := range pgTemplates {
			_ = adminExec(ctx, pgAdminURL, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", tmpl))
		}
	}
	pgAdminURL = ""
	pgTemplates = map[string]string{}
}

// PrivatePostgres starts a PostgreSQL cluster of the test's own, listening
// on 127.0.0.1 (and a unix socket), for tests that stop and start their
// database or need TCP sessions; it is stopped when the test ends. Its
// URL(db) is a TCP URL.
func PrivatePostgres(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	// As root, PostgreSQL runs as another user, who must reach the data dir.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pg := &pgcluster.Cluster{Dir: filepath.Join(dir, "data"), SocketDir: filepath.Join(dir, "sock"), Host: "127.0.0.1"}
	if err := pg.Init(ctx); err != nil {
		t.Fatalf("testenv: PostgreSQL is needed and could not be initialised: %v", err)
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatalf("testenv: PostgreSQL is needed and could not be started: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	return pg
}
