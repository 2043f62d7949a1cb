package aggregator

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
)

// pywbRead answers a key range [key, end) as pywb's ZipNumIndexSource
// does, from a cluster's files alone: a binary search of the summary
// NAME.idx for the first block at or after key, one block back; the part's
// path from NAME.loc, relative to the summary; each block a gzip member
// read at its offset and length, lines kept while below end. It shares no
// code with the aggregator's reader.
func pywbRead(t *testing.T, idxPath, key, end string) []string {
	t.Helper()
	raw, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	summary := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(raw) == 0 {
		return nil
	}
	locRaw, err := os.ReadFile(strings.TrimSuffix(idxPath, ".idx") + ".loc")
	if err != nil {
		t.Fatal(err)
	}
	loc := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(locRaw)), "\n") {
		f := strings.Split(l, "\t")
		loc[f[0]] = filepath.Join(filepath.Dir(idxPath), f[1])
	}
	i := sort.Search(len(summary), func(i int) bool { return strings.Split(summary[i], "\t")[0] >= key })
	i = max(0, i-1)
	var out []string
	for ; i < len(summary); i++ {
		f := strings.Split(summary[i], "\t")
		if f[0] >= end {
			break
		}
		off, _ := strconv.ParseInt(f[2], 10, 64)
		length, _ := strconv.ParseInt(f[3], 10, 64)
		part, err := os.Open(loc[f[1]])
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(io.NewSectionReader(part, off, length))
		if err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if l := sc.Text(); l >= key && l < end {
				out = append(out, l)
			}
		}
		part.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestPywbReadsTheClustersAsTheAPIAnswers: the index files are ZipNum
// clusters that a reader of pywb's kind, reading only .idx, .loc and
// blocks, answers exactly as the CDX API does, for exact, prefix, host and
// domain queries, over several levels of clusters.
func TestPywbReadsTheClustersAsTheAPIAnswers(t *testing.T) {
	a, bs, hosts, gens := clusteredAggregator(t)
	r := rand.New(rand.NewPCG(33, 2))
	root := bs.(*blob.Local).Root()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	api := func(q string) []string {
		if body := strings.TrimRight(cdxGet(t, srv, q), "\n"); body != "" {
			return strings.Split(body, "\n")
		}
		return nil
	}
	files := func(key, end string, keep func(string) bool) []string {
		var out []string
		for _, g := range gens {
			for _, l := range pywbRead(t, filepath.Join(root, filepath.FromSlash(g.Key)), key, end) {
				if k, _, _ := strings.Cut(l, " "); keep == nil || keep(k) {
					out = append(out, l)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	inc := func(s string) string { return s[:len(s)-1] + string(s[len(s)-1]+1) }
	checked := 0
	for _, h := range hosts {
		host := strings.Join(reverse(strings.Split(h, ",")), ".")
		page := fmt.Sprintf("%s)/p%d", h, r.IntN(12))
		cases := []struct {
			query, key, end string
			keep            func(string) bool
		}{
			{"url=" + host + "/" + strings.SplitN(page, "/", 2)[1], page + " ", page + "!", nil},
			{"url=" + host + "/p1&matchType=prefix", h + ")/p1", inc(h + ")/p1"), nil},
			{"url=" + host + "&matchType=host", h + ")", inc(h + ")"), nil},
			{"url=" + host + "&matchType=domain", h, inc(h), func(k string) bool { return strings.HasPrefix(k, h+")") || strings.HasPrefix(k, h+",") }},
		}
		for _, c := range cases {
			got, want := api(c.query), files(c.key, c.end, c.keep)
			if !slices.Equal(got, want) {
				t.Errorf("%s: the API answers %d lines, the files alone %d", c.query, len(got), len(want))
			}
			checked += len(want)
		}
	}
	if checked == 0 {
		t.Fatal("no query selected a line")
	}
}

// clusteredAggregator is an aggregator holding 20 files' random lines
// over six hosts in clusters of more than one level, blocks of 40 lines.
func clusteredAggregator(t *testing.T) (*Aggregator, blob.Store, []string, []Generation) {
	t.Helper()
	ctx := context.Background()
	a, bs := storeAggregator(t)
	a.cfg.LevelFactor, a.cfg.BlockLines, a.cfg.MaxQueryLines = 3, 40, 100000
	r := rand.New(rand.NewPCG(33, 1))
	hosts := []string{"com,example", "com,example,shop", "com,example,mail", "org,iana", "org,iana,data", "net,site"}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for f := range 20 {
		file := fmt.Sprintf("warcs/crawl-%02d.warc.gz", f) // its key, and its lines' name
		var lines []string
		for range 30 + r.IntN(60) {
			lines = append(lines, fmt.Sprintf("%s)/p%d %d http://x/ text/html 200 D - - 10 %d %s",
				hosts[r.IntN(len(hosts))], r.IntN(12), 20260101000000+r.IntN(1000000), r.IntN(100000), file))
		}
		announce(t, a, bs, file, at.Add(time.Duration(f)*time.Minute), lines...)
		if f%2 == 1 {
			if err := a.MergeNew(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	gens, err := a.Generations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]bool{}
	for _, g := range gens {
		levels[g.Level] = true
	}
	if len(levels) < 2 {
		t.Fatalf("clusters %+v: want more than one level", gens)
	}
	return a, bs, hosts, gens
}

func reverse(s []string) []string {
	slices.Reverse(s)
	return s
}

// cdxGet answers a /cdx query of srv, failing the test on anything but
// 200.
func cdxGet(t *testing.T, srv *httptest.Server, q string) string {
	t.Helper()
	body, _ := cdxAnswer(t, srv, q)
	return body
}

// TestPagesPartitionTheAnswer: showNumPages counts the pages of pageSize
// blocks a query spans, as pywb's ZipNum source does, and pages 0 to N-1,
// read one after the other, are the whole answer, each line once, over
// clusters of several levels; a page past the last is a 400 that says
// which pages there are.
func TestPagesPartitionTheAnswer(t *testing.T) {
	a, _, _, _ := clusteredAggregator(t)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	for _, q := range []string{"url=example.com&matchType=domain", "url=iana.org&matchType=host", "url=site.net/p1&matchType=prefix", "url=example.com/p&matchType=prefix"} {
		whole := cdxGet(t, srv, q)
		for _, size := range []int{1, 2, 5} {
			var info struct{ Pages, PageSize, Blocks int }
			if err := json.Unmarshal([]byte(cdxGet(t, srv, fmt.Sprintf("%s&showNumPages=true&pageSize=%d", q, size))), &info); err != nil {
				t.Fatal(err)
			}
			if info.PageSize != size || info.Pages != (info.Blocks+size-1)/size || info.Pages == 0 {
				t.Fatalf("%s pageSize=%d: %+v", q, size, info)
			}
			var paged strings.Builder
			for p := range info.Pages {
				paged.WriteString(cdxGet(t, srv, fmt.Sprintf("%s&page=%d&pageSize=%d", q, p, size)))
			}
			if paged.String() != whole {
				t.Errorf("%s: %d pages of %d blocks give %d lines, the whole answer %d", q, info.Pages, size,
					strings.Count(paged.String(), "\n"), strings.Count(whole, "\n"))
			}
			resp, err := http.Get(fmt.Sprintf("%s/cdx?%s&page=%d&pageSize=%d", srv.URL, q, info.Pages, size))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), fmt.Sprintf("0 to %d", info.Pages-1)) {
				t.Errorf("a page past the last: %d %s", resp.StatusCode, b)
			}
		}
	}
}

// TestFiltersAndCollapse: pywb's filter forms (contains, =exact,
// ~regex from the start, ! inverted, a field or the line) and collapse
// select what a scan of the whole answer selects.
func TestFiltersAndCollapse(t *testing.T) {
	a, _, _, _ := clusteredAggregator(t)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	const q = "url=example.com&matchType=domain"
	all := strings.Split(strings.TrimRight(cdxGet(t, srv, q), "\n"), "\n")
	sel := func(keep func(f []string) bool) string {
		var out strings.Builder
		for _, l := range all {
			if keep(strings.Fields(l)) {
				out.WriteString(l + "\n")
			}
		}
		return out.String()
	}
	for filter, keep := range map[string]func(f []string) bool{
		"filter=urlkey:/p1":                               func(f []string) bool { return strings.Contains(f[0], "/p1") },
		"filter==urlkey:com,example)/p1":                  func(f []string) bool { return f[0] == "com,example)/p1" },
		"filter=~urlkey:com,example,(shop)":               func(f []string) bool { return strings.HasPrefix(f[0], "com,example,shop") },
		"filter=!~timestamp:2026010[1-5]":                 func(f []string) bool { return !(f[1] >= "20260101" && f[1] < "20260106") },
		"filter=crawl-03&filter=!=original:nope":          func(f []string) bool { return strings.Contains(strings.Join(f, " "), "crawl-03") },
		"filter=statuscode:200&filter=mimetype:text/html": func(f []string) bool { return true },
	} {
		want := sel(keep)
		if got := cdxGet(t, srv, q+"&"+filter); got != want {
			t.Errorf("%s: %d lines, want %d", filter, strings.Count(got, "\n"), strings.Count(want, "\n"))
		}
	}
	last, n := "", 0
	want := sel(func(f []string) bool {
		if n > 0 && f[0] == last {
			return false
		}
		last, n = f[0], n+1
		return true
	})
	if got := cdxGet(t, srv, q+"&collapse=urlkey"); got != want || n < 10 {
		t.Errorf("collapse=urlkey: %d lines, want %d", strings.Count(got, "\n"), n)
	}
	last, n = "", 0
	want = sel(func(f []string) bool {
		if n > 0 && f[1][:8] == last {
			return false
		}
		last, n = f[1][:8], n+1
		return true
	})
	if got := cdxGet(t, srv, q+"&collapseTime=8"); got != want {
		t.Errorf("collapseTime=8: %d lines, want %d", strings.Count(got, "\n"), n)
	}
}

// TestExportIsThePlainIndex: GET /v1/index/cdx is every line of every
// cluster once, sorted, under the CDX header, as the CDX API answers them
// (a withdrawn file's lines and excluded captures left out): plain CDX
// stays available for small collections' tools.
func TestExportIsThePlainIndex(t *testing.T) {
	a, _, _, _ := clusteredAggregator(t)
	ctx := context.Background()
	if _, err := a.Withdraw(ctx, "warcs/crawl-05.warc.gz", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddExclusion(ctx, Exclusion{SURT: "org,iana", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/index/cdx")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	lines := strings.Split(strings.TrimRight(string(body), "\n"), "\n")
	if resp.StatusCode != 200 || lines[0] != " CDX N b a m s k r M S V g" {
		t.Fatalf("%d, first line %q", resp.StatusCode, lines[0])
	}
	lines = lines[1:]
	var want []string
	for _, q := range []string{"url=example.com&matchType=domain", "url=site.net&matchType=domain", "url=iana.org&matchType=domain"} {
		if got := strings.TrimRight(cdxGet(t, srv, q), "\n"); got != "" {
			want = append(want, strings.Split(got, "\n")...)
		}
	}
	slices.Sort(want)
	if !slices.IsSorted(lines) || !slices.Equal(lines, want) || len(lines) < 100 {
		t.Errorf("export: %d lines, the API's answers %d", len(lines), len(want))
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " warcs/crawl-05.warc.gz") || strings.HasPrefix(l, "org,iana") {
			t.Fatalf("a withdrawn or excluded line exported: %s", l)
		}
	}
}
