package aggregator

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// TestTheRightCaptureAmongTwentyThousand: a URL with 20,000 captures (in
// two clusters, between neighbours' captures, blocks of 200 lines), more than a
// query may read (10,000): closest answers the nearest captures for times
// at the start, the middle and past the end, earlier first on a tie, as
// pywb's closest sort orders them (by absolute distance from the
// timestamp); reverse answers the newest first; each reads a few blocks,
// not the URL's whole run, and the read cap is reported when an answer
// is cut by it.
func TestTheRightCaptureAmongTwentyThousand(t *testing.T) {
	ctx := context.Background()
	a, local := storeAggregator(t)
	cs := &countingStore{Store: local}
	a.blob = cs
	a.cfg.MaxQueryLines, a.cfg.BlockLines = 10000, 200
	all, start := twentyThousand(t, a, local)
	const n = 20000
	gens, err := a.Generations(ctx)
	if err != nil || len(gens) != 2 {
		t.Fatalf("clusters %+v, %v: want two", gens, err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	a.Lookup(ctx, cdxindex.Query{Key: "com,example)/page", Limit: 1}, nil) // summaries read once, then kept
	block := (gens[0].Bytes + gens[1].Bytes) / (gens[0].Blocks + gens[1].Blocks)

	get := func(q string) ([]string, http.Header) {
		t.Helper()
		cs.read.Store(0)
		resp, err := http.Get(srv.URL + "/cdx?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, b)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n"), resp.Header
	}
	// closest, as pywb orders it: by distance, the index order on a tie.
	nearest := func(ts string, k int) []string {
		at := timestampTime(ts)
		dist := func(l string) time.Duration {
			d := timestampTime(strings.Fields(l)[1]).Sub(at)
			return max(d, -d)
		}
		sorted := slices.Clone(all)
		slices.SortStableFunc(sorted, func(x, y string) int { return cmp.Compare(dist(x), dist(y)) })
		return sorted[:k]
	}
	for _, c := range []struct{ name, ts string }{
		{"the start", "20200101003000"}, // a tie: 00:00 and 01:00
		{"the middle", start.Add(10000*time.Hour + 20*time.Minute).Format("20060102150405")},
		{"past the end", "20991231000000"},
		{"before the start", "1999"},
	} {
		for _, q := range []string{"url=example.com/page&closest=" + c.ts + "&limit=3", "url=example.com/page&sort=closest&closest=" + c.ts + "&limit=3"} {
			got, _ := get(q)
			if want := nearest(c.ts, 3); !slices.Equal(got, want) {
				t.Errorf("closest to %s (%s):\n got %q\nwant %q", c.name, q, got, want)
			}
			if r := cs.read.Load(); r > 16*block {
				t.Errorf("closest to %s read %d bytes, %d blocks' worth; want a few of each cluster's, not the URL's hundred", c.name, r, r/block)
			}
		}
	}
	got, _ := get("url=example.com/page&sort=reverse&limit=5")
	if want := slices.Clone(all[n-5:]); !slices.Equal(got, reverse(want)) {
		t.Errorf("reverse, limit 5:\n got %q\nwant the newest five, newest first", got)
	}
	if r := cs.read.Load(); r > 16*block {
		t.Errorf("reverse, limit 5, read %d bytes, %d blocks' worth", r, r/block)
	}
	// Without a limit the answer is cut by the read cap: the newest lines
	// without a gap, newest first, and a header saying so.
	got, h := get("url=example.com/page&sort=reverse")
	if k := len(got); k < 1000 || k > 10000 || !slices.Equal(got, reverse(slices.Clone(all[n-k:]))) || h.Get("Archivist-Lines-Read-Cap") != "10000" {
		t.Errorf("reverse without a limit: %d lines from %q to %q, cap header %q; want the newest, newest first, without a gap, saying it was cut",
			k, got[0], got[k-1], h.Get("Archivist-Lines-Read-Cap"))
	}
	// Reverse with a collapse: the newest runs, each the first of its run
	// in index order (pywb collapses, then reverses), not the oldest
	// runs of the first lines read.
	var days []string
	for _, l := range all {
		if d := strings.Fields(l)[1][:8]; len(days) == 0 || strings.Fields(days[len(days)-1])[1][:8] != d {
			days = append(days, l)
		}
	}
	for _, q := range []string{"url=example.com/page&sort=reverse&collapse=timestamp:8&limit=5", "url=example.com/page&reverse=true&collapseTime=8&limit=5"} {
		if got, h := get(q); !slices.Equal(got, reverse(slices.Clone(days[len(days)-5:]))) || h.Get("Archivist-Lines-Read-Cap") != "" {
			t.Errorf("%s:\n got %q (cap header %q)\nwant the newest five days' first captures, newest first, whole", q, got, h.Get("Archivist-Lines-Read-Cap"))
		}
	}
	// Without a limit it is cut by the cap, and says so; the oldest run
	// read, which may go on before what was read, is left out.
	if got, h := get("url=example.com/page&sort=reverse&collapseTime=8"); len(got) < 100 || h.Get("Archivist-Lines-Read-Cap") != "10000" ||
		!slices.Equal(got, reverse(slices.Clone(days[len(days)-len(got):]))) {
		t.Errorf("reverse with a collapse, no limit: %d days, cap header %q; want the newest days without a gap, saying it was cut", len(got), h.Get("Archivist-Lines-Read-Cap"))
	}
	// The empty closest= of pywb's calendar query is the index order,
	// with sort=closest or without.
	for _, q := range []string{"url=example.com/page&closest=&limit=2", "url=example.com/page&sort=closest&closest=&limit=2"} {
		if got, _ := get(q); !slices.Equal(got, all[:2]) {
			t.Errorf("%s: %q, want the first two in index order", q, got)
		}
	}
}

// twentyThousand indexes 20,000 hourly captures of one URL from 2020 in
// two clusters (even ones in one, odd in the other), with 3,000
// neighbours' lines on either side, and returns the URL's lines in index
// order and the first capture's time.
func twentyThousand(t *testing.T, a *Aggregator, local blob.Store) ([]string, time.Time) {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 20000
	var all, even, odd []string
	for i := range n {
		ts := start.Add(time.Duration(i) * time.Hour).Format("20060102150405")
		file := "a.warc.gz"
		if i%2 == 1 {
			file = "b.warc.gz"
		}
		l := fmt.Sprintf("com,example)/page %s http://example.com/page text/html 200 D%05d - - 100 %d %s", ts, i, i*100, file)
		all = append(all, l)
		if i%2 == 0 {
			even = append(even, l)
		} else {
			odd = append(odd, l)
		}
	}
	for i := range 3000 { // neighbours on either side of the URL's run
		even = append(even, fmt.Sprintf("com,example)/pag %s http://example.com/pag text/html 200 N - - 100 %d a.warc.gz", start.Format("20060102150405"), i*100+1))
		odd = append(odd, fmt.Sprintf("com,example)/pagf%04d %s http://example.com/pagf text/html 200 N - - 100 %d b.warc.gz", i, start.Format("20060102150405"), i*100+2))
	}
	announce(t, a, local, "a.warc.gz", start, even...)
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	announce(t, a, local, "b.warc.gz", start.Add(time.Minute), odd...)
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	return all, start
}
