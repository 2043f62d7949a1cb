package aggregator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
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
	// Lines read count toward the cap, kept or not (N22): a filter that
	// keeps none and a collapse that keeps one stop at the cap, and say
	// so; a domain match seeks to the host's two ranges, not the bare
	// prefix ("c" begins every line here).
	for _, q := range []string{"url=com&matchType=domain&filter=url:nothing-matches", "url=com&matchType=domain&collapse=filename",
		"url=com&matchType=domain&filter=!~.*(a|b)*.*&filter=url:nothing", "url=c&matchType=domain"} {
		cs.read.Store(0)
		resp, err := http.Get(srv.URL + "/cdx?" + q)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", q, resp.StatusCode)
		}
		if n := cs.read.Load(); n > 3*block {
			t.Errorf("%s read %d KiB of a %d KiB index (blocks of %d KiB)", q, n>>10, gens[0].Bytes>>10, block>>10)
		}
		if capped := resp.Header.Get("Archivist-Lines-Read-Cap"); (capped == "") != strings.HasPrefix(q, "url=c&") {
			t.Errorf("%s: Archivist-Lines-Read-Cap %q", q, capped)
		}
	}
}

// TestQueriesAreBoundedBeforeTheyRun (N21): a query's filters are
// bounded in number, length and program size before any is compiled, and
// each refusal is a 400 that names the bound; a 12 KB regular expression,
// which took seconds and a gigabyte to compile, is refused having cost
// next to nothing.
func TestQueriesAreBoundedBeforeTheyRun(t *testing.T) {
	a, local := storeAggregator(t)
	announce(t, a, local, "a.warc.gz", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"com,example)/ 20260101000000 http://example.com/ text/html 200 AAAA - - 100 0 a.warc.gz")
	if err := a.MergeNew(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	huge := "!~" + strings.Repeat("(.{0,999})", 1200) + "#"
	for _, c := range []struct {
		what, filters, want string
	}{
		{"nine filters", strings.Repeat("&filter=url:a", 9), "at most 8 filters"},
		{"a long filter", "&filter=url:" + strings.Repeat("a", 300), "at most 256 bytes"},
		{"a short regex of a large program", "&filter=" + url.QueryEscape("~(.{0,99}){10}(.{0,99}){10}(.{0,99}){10}"), "too large"},
		{"a 12 KB regex", "&filter=" + url.QueryEscape(huge), "at most 256 bytes"},
		{"a bad regex", "&filter=" + url.QueryEscape("~(("), "not a regular expression"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := http.Get(srv.URL + "/cdx?url=example.com" + c.filters)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.what, resp.StatusCode, body, c.want)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%s allocated %d MiB to be refused", c.what, grew>>20)
		}
	}
	// Within the bounds, filters still work.
	if got := cdxGet(t, srv, "url=example.com&filter="+url.QueryEscape("~url:http://ex.*")+"&filter=status:200"); !strings.Contains(got, "example.com") {
		t.Errorf("a bounded regex filter: %q", got)
	}
}
