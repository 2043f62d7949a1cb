package aggregator

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
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
// with limit=1, reads a block or two of each cluster of a 200,000-line
// index, not the index; without a limit a query stops at
// AGGREGATOR_MAX_QUERY_LINES; an exact query reads at most two blocks of a
// cluster.
func TestQueriesReadOnlyWhatTheyAnswer(t *testing.T) {
	ctx := context.Background()
	a, local := storeAggregator(t)
	cs := &countingStore{Store: local}
	a.blob = cs
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var big, small []string
	for i := range 200_000 {
		big = append(big, fmt.Sprintf("com,example%06d)/ 20260101000000 http://example%06d.com/ text/html 200 AAAA - - 100 %d a.warc.gz", i, i, i*100))
	}
	for i := range 10 {
		small = append(small, fmt.Sprintf("com,example%06d)/ 20260102000000 http://example%06d.com/ text/html 200 BBBB - - 100 %d b.warc.gz", i*2, i*2, i*100))
	}
	announce(t, a, local, "a.warc.gz", at, big...)
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	announce(t, a, local, "b.warc.gz", at.Add(time.Minute), small...)
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	gens, _ := a.Generations(ctx)
	if len(gens) != 2 || gens[0].Blocks != 67 {
		t.Fatalf("clusters %+v: want two, the first of 67 blocks", gens)
	}
	a.Lookup(ctx, cdxindex.Query{Key: "com,", Prefix: true, Limit: 1}, nil) // summaries read once, then kept
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	block := gens[0].Bytes / gens[0].Blocks
	get := func(q string) []string {
		t.Helper()
		cs.read.Store(0)
		return strings.Split(strings.TrimSpace(cdxGet(t, srv, q)), "\n")
	}
	got := get("url=com&matchType=domain&limit=1")
	if len(got) != 1 || !strings.HasPrefix(got[0], "com,example000000)/ 20260101") {
		t.Errorf("limit=1: %q", got)
	}
	if n := cs.read.Load(); n > 3*block {
		t.Errorf("limit=1 read %d KiB of a %d KiB index (blocks of %d KiB)", n>>10, gens[0].Bytes>>10, block>>10)
	}
	got = get("url=com&matchType=domain")
	if len(got) != 1000 {
		t.Errorf("no limit: %d lines, want the cap of 1000", len(got))
	}
	if n := cs.read.Load(); n > 3*block {
		t.Errorf("a capped query read %d KiB", n>>10)
	}
	// Both clusters merged in order, each line once.
	got = get("url=example000002.com&limit=5")
	if len(got) != 2 || !strings.Contains(got[0], "20260101") || !strings.Contains(got[1], "20260102") {
		t.Errorf("merged: %q", got)
	}
	// An exact query past the small cluster's keys reads one cluster, at
	// most two blocks of it.
	get("url=example150000.com")
	if n := cs.read.Load(); n > 2*block+block/2 {
		t.Errorf("an exact query read %d KiB (blocks of %d KiB)", n>>10, block>>10)
	}
}
