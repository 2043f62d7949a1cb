package store_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var widgets = store.Schema{Name: "widgets", Migrations: fstest.MapFS{
	"001_create_widgets.sql": {Data: []byte("CREATE TABLE widgets.widgets (id text PRIMARY KEY, n int NOT NULL);\n---- create above / drop below ----\nDROP TABLE widgets.widgets;\n")},
	"002_add_note.sql":       {Data: []byte("ALTER TABLE widgets.widgets ADD COLUMN note text;\n")},
}}

func TestMigrateConcurrentlyFromManyReplicas(t *testing.T) {
	pool := testenv.DB(t) // an empty database
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- store.Migrate(ctx, pool, widgets)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	v, err := store.Version(ctx, pool, store.Schema{Name: "widgets"})
	if err != nil || v != 2 {
		t.Fatalf("version %d (%v), want 2", v, err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO widgets.widgets (id, n, note) VALUES ('a', 1, 'x')"); err != nil {
		t.Fatalf("migrated table unusable: %v", err)
	}
	// Running again is a no-op.
	if err := store.Migrate(ctx, pool, widgets); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateLeavesANewerSchemaAlone: a build whose migrations end
// before the schema's version (a release rolled back after its migrations
// ran) migrates nothing and succeeds; the schema keeps its version and
// its data. tern refused it ("current version 2 is outside the valid
// versions of 0 to 1"), and the rollback's migrate Job failed.
func TestMigrateLeavesANewerSchemaAlone(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	if err := store.Migrate(ctx, pool, widgets); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO widgets.widgets (id, n, note) VALUES ('a', 1, 'kept')"); err != nil {
		t.Fatal(err)
	}
	older := store.Schema{Name: "widgets", Migrations: fstest.MapFS{"001_create_widgets.sql": widgets.Migrations.(fstest.MapFS)["001_create_widgets.sql"]}}
	if err := store.Migrate(ctx, pool, older); err != nil {
		t.Fatalf("the previous release's migrate on the newer schema: %v", err)
	}
	if v, err := store.Version(ctx, pool, older); err != nil || v != 2 {
		t.Errorf("version %d (%v) after the older migrate, want 2", v, err)
	}
	if latest, err := store.Latest(older); err != nil || latest != 1 {
		t.Errorf("the older build's latest %d (%v), want 1", latest, err)
	}
	var note string
	if err := pool.QueryRow(ctx, "SELECT note FROM widgets.widgets WHERE id = 'a'").Scan(&note); err != nil || note != "kept" {
		t.Errorf("the row after the older migrate: %q %v", note, err)
	}
}

func TestTemplateCloneIsIsolated(t *testing.T) {
	a := testenv.DB(t, widgets)
	b := testenv.DB(t, widgets)
	ctx := context.Background()
	if _, err := a.Exec(ctx, "INSERT INTO widgets.widgets (id, n) VALUES ('only-in-a', 1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM widgets.widgets").Scan(&n); err != nil || n != 0 {
		t.Fatalf("database b sees %d rows of a (%v)", n, err)
	}
}

func TestInTxCommitsOrRollsBack(t *testing.T) {
	pool := testenv.DB(t, widgets)
	ctx := context.Background()
	boom := errors.New("boom")
	err := store.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO widgets.widgets (id, n) VALUES ('rolled-back', 1)"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx returned %v", err)
	}
	if err := store.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO widgets.widgets (id, n) VALUES ('committed', 1)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, _ := pool.Query(ctx, "SELECT id FROM widgets.widgets ORDER BY id")
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "committed" {
		t.Errorf("rows %v, want [committed]", ids)
	}
}

// TestSessionsDetectLostClients: every session asks the server to probe
// its client within seconds, so a claim (a session lock) of a vanished
// node goes within about a minute, not the kernel's hours; a URL's own
// setting wins. (Over TCP: on a unix socket the server has nothing to
// probe, so the test cluster of its own listens on 127.0.0.1.)
func TestSessionsDetectLostClients(t *testing.T) {
	ctx := context.Background()
	pg := testenv.PrivatePostgres(t)
	url := pg.URL("postgres")
	for _, c := range []struct{ url, idle string }{{url, "30"}, {url + "&tcp_keepalives_idle=45", "45"}} {
		pool, err := store.Open(ctx, store.Config{URL: c.url, MaxConns: 1}, "test")
		if err != nil {
			t.Fatal(err)
		}
		var idle, interval, count, user string
		err = pool.QueryRow(ctx, `SELECT current_setting('tcp_keepalives_idle'), current_setting('tcp_keepalives_interval'),
			current_setting('tcp_keepalives_count'), current_setting('tcp_user_timeout')`).Scan(&idle, &interval, &count, &user)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if idle != c.idle || interval != "10" || count != "3" || user != "60000" {
			t.Errorf("%s: keepalive idle %s, interval %s, count %s, user timeout %s", c.url, idle, interval, count, user)
		}
	}
}

// TestPingAnswersForABusyPool: with every connection of the pool in use
// (here its only one, held), Ping still reports that PostgreSQL answers;
// and it reports a server that does not.
func TestPingAnswersForABusyPool(t *testing.T) {
	ctx := context.Background()
	url := testenv.DBURL(t)
	pool, err := store.Open(ctx, store.Config{URL: url, MaxConns: 1}, "ping-test")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := store.Ping(pctx, pool); err != nil {
		t.Errorf("Ping with the pool's only connection busy: %v, want PostgreSQL answering", err)
	}

	dead, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:"+strconv.Itoa(testenv.FreePort(t))+"/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if err := store.Ping(pctx, dead); err == nil {
		t.Error("Ping of a server that is not there reported it answering")
	}
}
