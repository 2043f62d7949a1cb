package aggregator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/testenv"
	"github.com/archivist/archivist/services/aggregator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// countingStore counts the bytes read from its objects.
type countingStore struct {
	blob.Store
	read atomic.Int64
}

type countingReader struct {
	io.ReadCloser
	ra io.ReaderAt
	n  *atomic.Int64
}

func (c countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.ra.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (s *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	rc, info, err := s.Store.Get(ctx, key)
	if err != nil {
		return rc, info, err
	}
	return countingReader{rc, rc.(io.ReaderAt), &s.read}, info, nil
}

// TestQueriesReadOnlyWhatTheyAnswer: the query, every .com capture
// with limit=1, reads a few blocks of a 200,000-line index, not the index;
// without a limit a query stops at AGGREGATOR_MAX_QUERY_LINES.
func TestQueriesReadOnlyWhatTheyAnswer(t *testing.T) {
	ctx := context.Background()
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var main, recent bytes.Buffer
	for i := range 200_000 {
		fmt.Fprintf(&main, "com,example%06d)/ 20260101000000 http://example%06d.com/ text/html 200 AAAA - - 100 %d a.warc.gz\n", i, i, i*100)
	}
	for i := range 10 {
		fmt.Fprintf(&recent, "com,example%06d)/ 20260102000000 http://example%06d.com/ text/html 200 BBBB - - 100 %d b.warc.gz\n", i*2, i*2, i*100)
	}
	local.Put(ctx, "index/main.cdx", bytes.NewReader(main.Bytes()), nil)
	local.Put(ctx, "index/recent.cdx", bytes.NewReader(recent.Bytes()), nil)
	db, err := store.Open(ctx, store.Config{URL: testenv.DBURL(t, migrations.Schema), MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, `UPDATE aggregator.generations SET key = 'index/' || level || '.cdx'`); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: local}
	a := &Aggregator{db: db, blob: cs, cfg: Config{MaxQueryLines: 1000}, log: testenv.Logger(t)}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	get := func(q string) []string {
		t.Helper()
		cs.read.Store(0)
		resp, err := http.Get(srv.URL + "/cdx?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, b)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	got := get("url=com&matchType=domain&limit=1")
	if len(got) != 1 || !strings.HasPrefix(got[0], "com,example000000)/ 20260101") {
		t.Errorf("limit=1: %q", got)
	}
	if n := cs.read.Load(); n > 512<<10 {
		t.Errorf("limit=1 read %d KiB of a %d KiB index", n>>10, main.Len()>>10)
	}
	t.Logf("limit=1 read %d KiB of a %d KiB index", cs.read.Load()>>10, main.Len()>>10)
	got = get("url=com&matchType=domain")
	if len(got) != 1000 {
		t.Errorf("no limit: %d lines, want the cap of 1000", len(got))
	}
	if n := cs.read.Load(); n > 1<<20 {
		t.Errorf("a capped query read %d KiB", n>>10)
	}
	// Both generations merged in order, each line once.
	got = get("url=example000002.com&limit=5")
	if len(got) != 2 || !strings.Contains(got[0], "20260101") || !strings.Contains(got[1], "20260102") {
		t.Errorf("merged: %q", got)
	}
}
