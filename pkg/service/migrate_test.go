package service_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/testenv"
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
