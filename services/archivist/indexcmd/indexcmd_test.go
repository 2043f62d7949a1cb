package indexcmd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/archivist/indexcmd"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestIndexStatusAndReset: a file that cannot be indexed is parked, shown
// with its error by `archivist index status`, and made due again by
// `archivist index reset`.
func TestIndexStatusAndReset(t *testing.T) {
	ctx := context.Background()
	bs, _ := blob.NewLocal(t.TempDir())
	bs.Put(ctx, "warcs/junk.warc", strings.NewReader("this is no WARC at all\n"), nil)
	port := testenv.FreePort(t)
	dbURL := testenv.DBURL(t, migrations.Schema)
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	testenv.StartServiceIn(t, indexer.Definition(), testenv.Shared{NATSURL: testenv.NATS(t), DBURL: dbURL, Blob: bs},
		map[string]string{"INDEXER_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "INDEXER_REPOSITORY_PREFIX": "warcs/",
			"INDEXER_DISPATCH_INTERVAL": "50ms", "INDEXER_MAX_FAILURES": "2", "INDEXER_RETRY_BASE": "20ms"})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	attempts := func() int {
		var n int
		if err := db.QueryRow(ctx, `SELECT attempts FROM indexer.files WHERE name = 'warcs/junk.warc'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := indexcmd.Status(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Parked) == 1 {
			var out strings.Builder
			indexcmd.Print(&out, st, nil, nil, time.Now())
			if !strings.Contains(out.String(), "warcs/junk.warc") || !strings.Contains(out.String(), "not a WARC or ARC record header") ||
				!strings.Contains(out.String(), "parked 1") {
				t.Errorf("status:\n%s", out.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never parked: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := attempts()
	if err := indexcmd.Reset(ctx, base, "warcs/junk.warc"); err != nil {
		t.Fatal(err)
	}
	if err := indexcmd.Reset(ctx, base, "warcs/nope.warc"); err == nil || !strings.Contains(err.Error(), "no index/file/warcs/nope.warc here") {
		t.Errorf("reset of an unknown file: %v", err)
	}
	// The reset file is tried again (and, still junk, parked again).
	for deadline := time.Now().Add(20 * time.Second); attempts() <= before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reset did not make the file due: still %d attempts", before)
		}
	}
}
