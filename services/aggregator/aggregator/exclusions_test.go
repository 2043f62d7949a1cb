package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
)

// send makes a request with a JSON body and returns its status and body.
func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// TestExclusionsApplyToEveryQueryAtOnce: an exclusion added through one
// replica takes its captures (a prefix, optionally a time range) out of
// the next answer of another; lifting it puts them back; the list exports
// as pywb ACL rules; a bad exclusion is a 400 that says what is wrong.
func TestExclusionsApplyToEveryQueryAtOnce(t *testing.T) {
	a, bs, _, _ := clusteredAggregator(t)
	one := httptest.NewServer(a.Handler())
	defer one.Close()
	other := httptest.NewServer(New(a.db, bs, a.cfg, slog.New(slog.NewTextHandler(io.Discard, nil))).Handler())
	defer other.Close()
	const q = "url=example.com&matchType=domain"
	all := strings.Split(strings.TrimRight(cdxGet(t, other, q), "\n"), "\n")
	count := func(keep func(key, ts string) bool) int {
		n := 0
		for _, l := range all {
			f := strings.Fields(l)
			if keep(f[0], f[1]) {
				n++
			}
		}
		return n
	}
	lines := func() int { return strings.Count(cdxGet(t, other, q), "\n") }

	code, body := send(t, "POST", one.URL+"/v1/index/exclusions", `{"url": "http://shop.example.com/", "reason": "takedown request 2026-11"}`)
	if code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	var shop Exclusion
	json.Unmarshal([]byte(body), &shop)
	if shop.SURT != "com,example,shop)/" || shop.ID == 0 {
		t.Errorf("added %+v", shop)
	}
	want := count(func(k, ts string) bool { return !strings.HasPrefix(k, "com,example,shop)/") })
	if got := lines(); got != want || want == len(all) {
		t.Errorf("after excluding shop.example.com: %d lines, want %d of %d", got, want, len(all))
	}
	code, body = send(t, "POST", one.URL+"/v1/index/exclusions", `{"surt": "com,example,mail", "from": "202601050000", "to": "20260108", "reason": "legal hold"}`)
	if code != 201 {
		t.Fatalf("add a timed exclusion: %d %s", code, body)
	}
	want = count(func(k, ts string) bool {
		return !strings.HasPrefix(k, "com,example,shop)/") && !(strings.HasPrefix(k, "com,example,mail") && ts >= "202601050000" && ts < "20260109")
	})
	if got := lines(); got != want {
		t.Errorf("after a timed exclusion: %d lines, want %d", got, want)
	}
	_, acl := send(t, "GET", other.URL+"/v1/index/exclusions?format=aclj", "")
	wantACL := `com,example,shop)/ - {"access":"exclude","url":"http://shop.example.com/"}` + "\n" +
		`com,example,mail - {"access":"exclude","after":"20260105000000","before":"20260108999999"}` + "\n"
	if acl != wantACL {
		t.Errorf("pywb ACL rules:\n%s\nwant\n%s", acl, wantACL)
	}
	if code, body := send(t, "DELETE", one.URL+fmt.Sprintf("/v1/index/exclusions/%d", shop.ID), ""); code != 200 {
		t.Errorf("lift: %d %s", code, body)
	}
	want = count(func(k, ts string) bool {
		return !(strings.HasPrefix(k, "com,example,mail") && ts >= "202601050000" && ts < "20260109")
	})
	if got := lines(); got != want {
		t.Errorf("after lifting the first: %d lines, want %d", got, want)
	}
	for body, say := range map[string]string{
		`{"url": "http://x.com/"}`:                                       "reason",
		`{"url": "http://x.com/", "surt": "com,x)/", "reason": "r"}`:     "either url",
		`{"surt": "com,x", "from": "2026-01", "reason": "r"}`:            "from: a timestamp",
		`{"surt": "com,x", "from": "2027", "to": "2026", "reason": "r"}`: "from is after to",
		`{"surt": "com,x", "reason": "r", "extra": 1}`:                   "unknown field",
	} {
		if code, got := send(t, "POST", one.URL+"/v1/index/exclusions", body); code != 400 || !strings.Contains(got, say) {
			t.Errorf("%s: %d %s, want a 400 saying %q", body, code, got, say)
		}
	}
	if code, _ := send(t, "DELETE", one.URL+"/v1/index/exclusions/99999", ""); code != 404 {
		t.Errorf("lifting an unknown exclusion: %d", code)
	}
}

// TestPathIndexNamesEachFile: the path index lists every indexed file by
// the name its CDX lines carry (its key, as events.CDXFileName spells it),
// with its location, sorted, as pywb reads it; a file of the same base
// name under another prefix (a corrected WARC's next version, another
// object's crawl.warc.gz) has a name of its own and is answered beside
// it; a withdrawn file leaves the path index, and an announcement of it
// again is refused.
func TestPathIndexNamesEachFile(t *testing.T) {
	a, bs, _, _ := clusteredAggregator(t)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	_, body := send(t, "GET", srv.URL+"/v1/index/paths", "")
	rows := strings.Split(strings.TrimRight(body, "\n"), "\n")
	root := bs.(*blob.Local).Root()
	if len(rows) != 20 || rows[0] != "warcs/crawl-00.warc.gz\t"+filepath.Join(root, "warcs", "crawl-00.warc.gz") || !slices.IsSorted(rows) {
		t.Errorf("path index (%d rows):\n%s", len(rows), body)
	}
	code, body := send(t, "GET", srv.URL+"/v1/index/paths/warcs/crawl-03.warc.gz", "")
	if code != 200 || !strings.Contains(body, `"file":"warcs/crawl-03.warc.gz"`) {
		t.Errorf("one path: %d %s", code, body)
	}
	if code, _ := send(t, "GET", srv.URL+"/v1/index/paths/none.warc.gz", ""); code != 404 {
		t.Errorf("an unknown name: %d", code)
	}
	ctx := context.Background()
	ev := &events.IndexCDXReady{File: "other/crawl-03.warc.gz", Output: "cdx/x.cdx", Lines: 1, Complete: true}
	if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: "x", SentAt: time.Now()}, Event: ev}); err != nil {
		t.Errorf("a second crawl-03.warc.gz, under another prefix: %v", err)
	}
	if code, body := send(t, "GET", srv.URL+"/v1/index/paths/other/crawl-03.warc.gz", ""); code != 200 || !strings.Contains(body, `"file":"other/crawl-03.warc.gz"`) {
		t.Errorf("the second crawl-03.warc.gz: %d %s", code, body)
	}
	if _, err := a.Withdraw(ctx, "warcs/crawl-03.warc.gz", "moved"); err != nil {
		t.Fatal(err)
	}
	if code, _ := send(t, "GET", srv.URL+"/v1/index/paths/warcs/crawl-03.warc.gz", ""); code != 404 {
		t.Errorf("a withdrawn file's path: %d", code)
	}
	again := &events.IndexCDXReady{File: "warcs/crawl-03.warc.gz", Output: "cdx/y.cdx", Lines: 1, Complete: true}
	if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: "y", SentAt: time.Now()}, Event: again}); err != nil {
		t.Fatal(err)
	}
	if code, _ := send(t, "GET", srv.URL+"/v1/index/paths/warcs/crawl-03.warc.gz", ""); code != 404 {
		t.Errorf("a withdrawn file announced again is back in the path index: %d", code)
	}
}

// TestExclusionLookUpIsEveryExclusionTested: the look-up by prefix length
// and prefix answers what testing every exclusion answers, for random
// prefixes of several lengths, with and without time ranges.
func TestExclusionLookUpIsEveryExclusionTested(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	hosts := []string{"com,example", "com,example,www", "org,iana", "net,site"}
	key := func() string {
		return fmt.Sprintf("%s)/p%d/q%d", hosts[r.IntN(len(hosts))], r.IntN(20), r.IntN(5))
	}
	var list []Exclusion
	for range 300 {
		k := key()
		e := Exclusion{SURT: k[:r.IntN(len(k))+1]}
		if r.IntN(3) == 0 {
			e.From, e.To = "2024", "2025"
		}
		list = append(list, e)
	}
	x := &exclusions{}
	x.set(list)
	for range 5000 {
		k, ts := key(), fmt.Sprintf("%d0101000000", 2022+r.IntN(5))
		want := slices.ContainsFunc(list, func(e Exclusion) bool { return e.excludes(k, ts) })
		if got := x.excluded(k+" "+ts+" http://x/ text/html 200 D - - 1 0 f", ""); got != want {
			t.Fatalf("%s %s: excluded %v, testing every exclusion %v", k, ts, got, want)
		}
	}
}

// BenchmarkExcluded: a line's look-up against 10^2 to 10^6 exclusions of
// one prefix length costs the same (a map look-up per length); beside it,
// testing every exclusion, as the list was checked before.
func BenchmarkExcluded(b *testing.B) {
	for _, n := range []int{100, 10_000, 1_000_000} {
		list := make([]Exclusion, n)
		for i := range list {
			list[i] = Exclusion{SURT: fmt.Sprintf("com,example)/taken/%07d", i)}
		}
		x := &exclusions{}
		x.set(list)
		const key, ts = "com,example)/kept/0000001", "20260101000000"
		line := key + " " + ts + " http://example.com/kept/0000001 text/html 200 D - - 1 0 f"
		b.Run(fmt.Sprintf("lookup/exclusions=%d", n), func(b *testing.B) {
			for b.Loop() {
				if x.excluded(line, "") {
					b.Fatal("excluded")
				}
			}
		})
		b.Run(fmt.Sprintf("every/exclusions=%d", n), func(b *testing.B) {
			for b.Loop() {
				if slices.ContainsFunc(list, func(e Exclusion) bool { return e.excludes(key, ts) }) {
					b.Fatal("excluded")
				}
			}
		})
	}
}
