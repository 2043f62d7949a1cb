package service_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/devkit/pgcluster"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func schema(name string) store.Schema {
	return store.Schema{Name: name, Migrations: fstest.MapFS{
		"001_t.sql": {Data: []byte("CREATE TABLE " + name + ".t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);")},
	}}
}

// TestMigrateGrantsRuntimeRolesTheirSchemaOnly: after `migrate`, a
// service's runtime role reads and writes its own schema, cannot change it,
// and cannot touch another service's.
func TestMigrateGrantsRuntimeRolesTheirSchemaOnly(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.DBURL(t)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, r := range []string{"svc_alpha", "svc_beta"} {
		if _, err := admin.Exec(ctx, "DO $$ BEGIN CREATE ROLE "+r+" LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"); err != nil {
			t.Fatal(err)
		}
	}
	defs := []service.Definition{{Name: "svc_alpha", Schemas: []store.Schema{schema("alpha")}}, {Name: "svc_beta", Schemas: []store.Schema{schema("beta")}}}
	if err := service.Migrate(ctx, defs, service.Common{Store: store.Config{URL: dbURL}}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dbURL)
	u.User = url.User("svc_alpha")
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO alpha.t (v) VALUES ('mine')"); err != nil {
		t.Errorf("runtime role cannot write its own schema: %v", err)
	}
	for _, q := range []string{"INSERT INTO beta.t (v) VALUES ('theirs')", "CREATE TABLE alpha.sneaky (x int)", "DROP TABLE alpha.t"} {
		if _, err := conn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied") && !strings.Contains(err.Error(), "must be owner") {
			t.Errorf("%s as svc_alpha: %v, want permission denied", q, err)
		}
	}
}

// TestAServiceWaitsForItsSchema: a service that does not migrate
// (MIGRATE_ON_START=false) starts nothing while its schema is behind the
// build, and /readyz says why; once `archivist migrate` has run, it starts.
func TestAServiceWaitsForItsSchema(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbURL := testenv.DBURL(t)
	gamma := store.Schema{Name: "gamma", Migrations: fstest.MapFS{
		"001_t.sql": {Data: []byte("CREATE TABLE gamma.t (id bigint PRIMARY KEY);")},
		"002_u.sql": {Data: []byte("ALTER TABLE gamma.t ADD COLUMN v text;")},
	}}
	ran := make(chan struct{})
	def := service.Definition{Name: "gamma", Schemas: []store.Schema{gamma}, NeedsDB: true, Run: func(ctx context.Context, env *service.Env) error {
		// The code of version 2: it needs the column.
		if _, err := env.DB.Exec(ctx, "INSERT INTO gamma.t (id, v) VALUES (1, 'x')"); err != nil {
			return err
		}
		close(ran)
		env.Ready()
		<-ctx.Done()
		return nil
	}}
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	done := make(chan error, 1)
	common := service.Common{ShutdownTimeout: 5 * time.Second, Auth: httpauth.Config{Mode: "off"}, Store: store.Config{URL: dbURL}}
	go func() {
		done <- service.Serve(ctx, []service.Definition{def}, common, service.Deps{Log: testenv.Logger(t), Admin: a})
	}()
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + a.Addr() + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	// The old schema: version 1 only.
	pool, err := store.Open(ctx, store.Config{URL: dbURL}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	old := store.Schema{Name: "gamma", Migrations: fstest.MapFS{"001_t.sql": gamma.Migrations.(fstest.MapFS)["001_t.sql"]}}
	if err := store.Migrate(ctx, pool, old); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "schema gamma is at version 1, this build needs 2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz %d %q, want 503 naming the schema's versions", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-ran:
		t.Fatal("the service ran on the old schema")
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := service.Migrate(ctx, []service.Definition{def}, common, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not start once migrated")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if code, _ := readyz(); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready after the migration")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMigrateRequiresRoles: with MIGRATE_REQUIRE_ROLES a service whose
// runtime role does not exist fails the migration, naming the role,
// instead of leaving it to be refused by every query.
func TestMigrateRequiresRoles(t *testing.T) {
	ctx := context.Background()
	defs := []service.Definition{{Name: "svc_missing_role", Schemas: []store.Schema{schema("delta")}}}
	common := service.Common{Store: store.Config{URL: testenv.DBURL(t)}, RequireRoles: true}
	if err := service.Migrate(ctx, defs, common, testenv.Logger(t)); err == nil || !strings.Contains(err.Error(), "runtime role svc_missing_role does not exist") {
		t.Fatalf("migrate: %v, want an error naming the missing role", err)
	}
	common.RequireRoles = false
	if err := service.Migrate(ctx, defs, common, testenv.Logger(t)); err != nil {
		t.Fatalf("without MIGRATE_REQUIRE_ROLES: %v", err)
	}
}

// TestMigrateWaitsForPostgreSQL: `archivist migrate` started before its
// database answers (a new CloudNativePG cluster) keeps trying within
// MIGRATE_WAIT and then migrates, logging in with PGUSER and PGPASSWORD
// beside a URL that names no credentials, so that a password holding
// "/", "@", "%", "?" or "#" needs no escaping. Without MIGRATE_WAIT it
// fails at the first refusal, and a migration that fails is not retried.
func TestMigrateWaitsForPostgreSQL(t *testing.T) {
	ctx := context.Background()
	const password = "s3/cr@t%2F?#x"
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pg := &pgcluster.Cluster{Dir: filepath.Join(dir, "data"), SocketDir: filepath.Join(dir, "sock"), Host: "127.0.0.1",
		Port: testenv.FreePort(t), Password: password}
	if err := pg.Init(ctx); err != nil {
		t.Fatalf("PostgreSQL is needed: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	t.Setenv("PGUSER", "postgres")
	t.Setenv("PGPASSWORD", password)
	dbURL := fmt.Sprintf("postgres://127.0.0.1:%d/postgres?sslmode=disable", pg.Port)
	defs := []service.Definition{{Name: "svc_waiting", Schemas: []store.Schema{schema("waiting")}}}

	common := service.Common{Store: store.Config{URL: dbURL}}
	if err := service.Migrate(ctx, defs, common, testenv.Logger(t)); err == nil || !fault.IsOutage(err) {
		t.Fatalf("migrate without MIGRATE_WAIT, PostgreSQL down: %v, want the outage at once", err)
	}

	started := make(chan error, 1)
	go func() {
		// The database comes up while migrate waits for it.
		time.Sleep(1500 * time.Millisecond)
		started <- pg.Start(ctx)
	}()
	common.MigrateWait = 2 * time.Minute
	if err := service.Migrate(ctx, defs, common, testenv.Logger(t)); err != nil {
		t.Fatalf("migrate with MIGRATE_WAIT while PostgreSQL starts: %v", err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM waiting.t").Scan(&n); err != nil {
		t.Fatalf("the schema is not there: %v", err)
	}

	// A migration that fails is the migration's fault: no waiting.
	broken := []service.Definition{{Name: "svc_broken", Schemas: []store.Schema{{Name: "broken", Migrations: fstest.MapFS{
		"001_t.sql": {Data: []byte("CREATE TABLE broken.t (id bigint REFERENCES nowhere(id));")},
	}}}}}
	err = service.Migrate(ctx, broken, common, testenv.Logger(t))
	if err == nil || strings.Contains(err.Error(), "MIGRATE_WAIT") {
		t.Fatalf("a failing migration: %v, want its error without waiting", err)
	}
}
