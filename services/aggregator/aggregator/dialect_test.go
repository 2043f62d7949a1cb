package aggregator

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
)

// The dialect tests: each answer is compared line for line with what
// pywb's own code writes for the same index, its rules cited where they
// are used (pywb/warcserver/index/cdxobject.py, cdxops.py, query.py,
// zipnum.py, warcserver/handlers.py, utils/memento.py), and the Internet
// Archive's resume keys with what its CDX server's documentation shows.

// dialectIndex is five captures: three of one hour, two of them 404s, a
// revisit with "-" fields, and a URL past ASCII; blocks of two lines.
var dialectIndex = []string{
	"com,example)/ 20260101000000 http://example.com/ text/html 200 AAAA - - 1000 0 a.warc.gz",
	"com,example)/ 20260101003000 http://example.com/ text/html 404 BBBB - - 900 1000 a.warc.gz",
	"com,example)/ 20260101004500 http://example.com/ text/html 404 BBBB - - 900 1900 a.warc.gz",
	"com,example)/ 20260101010000 http://example.com/ warc/revisit - AAAA - - 500 2800 a.warc.gz",
	"com,example)/caf%c3%a9 20260102000000 http://example.com/café text/html 200 CCCC - - 700 3300 a.warc.gz",
}

func dialectServer(t *testing.T, blockLines, maxLines int, lines []string) (*httptest.Server, blob.Store, *Aggregator) {
	t.Helper()
	a, bs := storeAggregator(t)
	a.cfg.BlockLines, a.cfg.MaxQueryLines = blockLines, maxLines
	announce(t, a, bs, "a.warc.gz", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), slices.Clone(lines)...)
	if err := a.MergeNew(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, bs, a
}

// cdxAnswer is a /cdx answer's body and headers, failing the test on
// anything but 200.
func cdxAnswer(t *testing.T, srv *httptest.Server, q string) (string, http.Header) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/cdx?" + q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", q, resp.StatusCode, b)
	}
	return string(b), resp.Header
}

func TestOutputsAsPywbWritesThem(t *testing.T) {
	srv, _, _ := dialectServer(t, 2, 1000, dialectIndex)
	for _, c := range []struct{ query, want string }{
		// CDXObject.to_json (conv_to_json) with no fields: every field of
		// the line in order, "-" kept, as json.dumps writes an
		// OrderedDict; to_json(fields): those fields the line has, in the
		// order asked. handlers.to_json: one object a line.
		{"url=example.com&limit=1&output=json",
			`{"urlkey": "com,example)/", "timestamp": "20260101000000", "url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "AAAA", "redirect": "-", "robotflags": "-", "length": "1000", "offset": "0", "filename": "a.warc.gz"}` + "\n"},
		{"url=example.com&from=20260101010000&output=json&fl=timestamp,status,redirect",
			`{"timestamp": "20260101010000", "status": "-", "redirect": "-"}` + "\n"},
		// json.dumps(ensure_ascii=True): past ASCII as \u and four hex digits.
		{"url=example.com/caf%C3%A9&output=json&fl=url",
			`{"url": "http://example.com/caf\u00e9"}` + "\n"},
		// CDXObject.to_cdxj: "urlkey timestamp " and the JSON of the
		// fields after those two (of fl's, those after the two).
		{"url=example.com&limit=1&output=cdxj",
			`com,example)/ 20260101000000 {"url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "AAAA", "redirect": "-", "robotflags": "-", "length": "1000", "offset": "0", "filename": "a.warc.gz"}` + "\n"},
		{"url=example.com&limit=1&output=cdxj&fl=urlkey,timestamp,url,status",
			`com,example)/ 20260101000000 {"url": "http://example.com/", "status": "200"}` + "\n"},
		// CDXObject.to_text(fields): the fields joined by spaces.
		{"url=example.com&limit=2&output=text&fl=timestamp,status",
			"20260101000000 200\n20260101003000 404\n"},
		// MementoUtils.make_timemap: each capture "<url>; rel="memento";
		// datetime="<HTTP date>"", joined by ",\n", the last ending in
		// "\n"; ahead of them, as wrap_timemap_header writes a TimeMap's
		// head: itself (from its first memento) and the original.
		{"url=example.com&output=link",
			`</cdx?url=example.com&output=link>; rel="self"; type="application/link-format"; from="Thu, 01 Jan 2026 00:00:00 GMT",` + "\n" +
				`<http://example.com>; rel="original",` + "\n" +
				`<http://example.com/>; rel="memento"; datetime="Thu, 01 Jan 2026 00:00:00 GMT",` + "\n" +
				`<http://example.com/>; rel="memento"; datetime="Thu, 01 Jan 2026 00:30:00 GMT",` + "\n" +
				`<http://example.com/>; rel="memento"; datetime="Thu, 01 Jan 2026 00:45:00 GMT",` + "\n" +
				`<http://example.com/>; rel="memento"; datetime="Thu, 01 Jan 2026 01:00:00 GMT"` + "\n"},
		// cdx_collapse_time_status: a run collapses on the timestamp's
		// first N digits and the status together.
		{"url=example.com&collapseTime=10&fl=timestamp,status", "20260101000000 200\n20260101003000 404\n20260101010000 -\n"},
		// CDX_ALT_FIELDS, in fl and in filters (cdxops.CDXFilter).
		{"url=example.com&fl=k,t,u,m,s,d,l,o,f&limit=1", "com,example)/ 20260101000000 http://example.com/ text/html 200 AAAA 1000 0 a.warc.gz\n"},
		{"url=example.com&filter=s:404&fl=t", "20260101003000\n20260101004500\n"},
		{"url=example.com&filter=!statuscode:404&filter=mimetype:text&fl=t", "20260101000000\n"},
		// query.py: fields for fl, from_ts for from, reverse=true for
		// sort=reverse, closest alone sorting whatever the matchType
		// (cdx_sort_closest: by distance, the earlier first on a tie).
		{"url=example.com&fields=timestamp&from_ts=20260101004500", "20260101004500\n20260101010000\n"},
		{"url=example.com&reverse=true&fl=timestamp&limit=2", "20260101010000\n20260101004500\n"},
		{"url=example.com/*&closest=20260101010000&fl=timestamp", "20260101010000\n20260101004500\n20260101003000\n20260101000000\n20260102000000\n"},
		{"url=example.com/*&closest=20260101010000&fl=timestamp&limit=2&sort=closest", "20260101010000\n20260101004500\n"},
		// process_cdx: a closest time wins over sort=reverse.
		{"url=example.com&sort=reverse&closest=20260101003500&fl=timestamp&limit=2", "20260101003000\n20260101004500\n"},
		// A page is sorted as asked (process_cdx runs on each page).
		{"url=example.com&matchType=host&page=0&pageSize=50&sort=reverse&fl=timestamp", "20260102000000\n20260101010000\n20260101004500\n20260101003000\n20260101000000\n"},
	} {
		if got, _ := cdxAnswer(t, srv, c.query); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.query, got, c.want)
		}
	}
}

// TestShowPagedIndexIsTheSummary: showPagedIndex answers the summary lines
// of a page's blocks, those pywb's ZipNumIndexSource.compute_page_range
// selects from the .idx file for the same query: from the block before the
// first at or after the key, to the last before the end key; pages of
// pageSize of them; in JSON as IDXObject.to_json writes them.
func TestShowPagedIndexIsTheSummary(t *testing.T) {
	srv, bs, a := dialectServer(t, 2, 1000, dialectIndex)
	gens, err := a.Generations(t.Context())
	if err != nil || len(gens) != 1 {
		t.Fatalf("clusters %+v, %v: want one", gens, err)
	}
	raw, err := os.ReadFile(filepath.Join(bs.(*blob.Local).Root(), filepath.FromSlash(gens[0].Key)))
	if err != nil {
		t.Fatal(err)
	}
	idx := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	pywbRange := func(key, end string) []string {
		first := max(0, sort.SearchStrings(idx, key)-1)
		last := sort.SearchStrings(idx, end) - 1
		return idx[first : last+1]
	}
	for _, c := range []struct{ query, key, end string }{
		{"url=example.com&matchType=host", "com,example)", "com,example*"},
		{"url=example.com/caf%C3%A9", "com,example)/caf%c3%a9 ", "com,example)/caf%c3%a9!"},
	} {
		want := pywbRange(c.key, c.end)
		var got []string
		for page := 0; ; page++ {
			body, _ := cdxAnswer(t, srv, fmt.Sprintf("%s&showPagedIndex=true&pageSize=2&page=%d", c.query, page))
			got = append(got, strings.Split(strings.TrimRight(body, "\n"), "\n")...)
			if len(got) >= len(want) {
				break
			}
		}
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: the paged index %q, pywb's selection of the summary %q", c.query, got, want)
		}
	}
	f := strings.Split(idx[0], "\t")
	body, _ := cdxAnswer(t, srv, "url=example.com&matchType=host&showPagedIndex=true&pageSize=1&output=json")
	if want := fmt.Sprintf(`{"urlkey": "%s", "part": "%s", "offset": %s, "length": %s, "lineno": %s}`+"\n", f[0], f[1], f[2], f[3], f[4]); body != want {
		t.Errorf("showPagedIndex in JSON: %q, want %q", body, want)
	}
}

// TestResumeKeysWalkTheWholeAnswer: an answer cut by its limit or by the
// read cap carries the key that resumes it (the header always; after a
// blank line with showResumeKey, as the Internet Archive's CDX server
// prints it; a last JSON object; a rel="next" link), and following the
// keys gives the whole answer in index order, each line once, even where
// captures share a second; an answer that ends exactly at its limit or the
// cap has no key, and is not marked cut.
func TestResumeKeysWalkTheWholeAnswer(t *testing.T) {
	var index []string
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 30 {
		ts := at.Add(time.Duration(i/2) * time.Minute).Format("20060102150405") // two captures of each second
		index = append(index, fmt.Sprintf("com,example)/page %s http://example.com/page text/html %d D%02d - - 10 %d a.warc.gz", ts, []int{200, 404}[i%3/2], i, i*10))
	}
	for i := range 10 { // as many as the cap
		index = append(index, fmt.Sprintf("com,example)/ten 2026010100000%d http://example.com/ten text/html 200 X - - 10 0 a.warc.gz", i))
	}
	slices.Sort(index)
	pageLines := index[:30]
	srv, _, _ := dialectServer(t, 4, 10, index)

	walk := func(q string, body func(string, http.Header) (lines []string, key string)) []string {
		var all []string
		key := ""
		for range 40 {
			qq := q
			if key != "" {
				qq += "&resumeKey=" + key
			}
			b, h := cdxAnswer(t, srv, qq)
			got, k := body(b, h)
			all = append(all, got...)
			if k == "" {
				return all
			}
			key = k
		}
		t.Fatalf("%s: still resuming after 40 answers", q)
		return nil
	}
	text := func(b string, h http.Header) ([]string, string) {
		main, key, _ := strings.Cut(b, "\n\n")
		if got := strings.TrimRight(key, "\n"); got != h.Get("Archivist-Resume-Key") {
			t.Errorf("resume key %q in the body, %q in the header", got, h.Get("Archivist-Resume-Key"))
		}
		if strings.TrimSpace(main) == "" {
			return nil, strings.TrimRight(key, "\n")
		}
		return strings.Split(strings.TrimRight(main, "\n"), "\n"), strings.TrimRight(key, "\n")
	}
	if got := walk("url=example.com/page&limit=7&showResumeKey=true", text); !slices.Equal(got, pageLines) {
		t.Errorf("limit=7 walked: %d lines, want the %d in order", len(got), len(pageLines))
	}
	// No limit: the cap (10 lines read) cuts each answer.
	if got := walk("url=example.com/page&showResumeKey=true", text); !slices.Equal(got, pageLines) {
		t.Errorf("cut by the cap, walked: %d lines, want the %d in order", len(got), len(pageLines))
	}
	// A filter that keeps one line in three: the cap counts the lines
	// read, and the key resumes after the last read, not the last kept.
	var kept []string
	for _, l := range pageLines {
		if strings.Contains(l, " 404 ") {
			kept = append(kept, l)
		}
	}
	if got := walk("url=example.com/page&filter=status:404&showResumeKey=true", text); !slices.Equal(got, kept) || len(kept) != 10 {
		t.Errorf("a filter walked: %d lines, want the %d it keeps", len(got), len(kept))
	}
	// JSON: with showResumeKey, and whenever the cap cuts the answer, a
	// last object says so.
	jsonBody := func(b string, h http.Header) ([]string, string) {
		ls := strings.Split(strings.TrimRight(b, "\n"), "\n")
		last := ls[len(ls)-1]
		if !strings.Contains(last, `"resumeKey"`) {
			return ls, ""
		}
		if h.Get("Archivist-Lines-Read-Cap") != "" && !strings.HasPrefix(last, `{"incomplete": "the answer was cut after 10 lines read`) {
			t.Errorf("an answer cut by the cap ends %q", last)
		}
		k := strings.TrimSuffix(last[strings.Index(last, `"resumeKey": "`)+len(`"resumeKey": "`):], `"}`)
		return ls[:len(ls)-1], k
	}
	if got := walk("url=example.com/page&output=json&fl=offset", jsonBody); len(got) != 30 || got[29] != `{"offset": "290"}` {
		t.Errorf("JSON walked: %d objects, last %q", len(got), got[len(got)-1])
	}
	// link: the TimeMap links its rest (rel="next").
	next := "/cdx?url=example.com/page&output=link&limit=7"
	mementos := 0
	for range 10 {
		u, err := url.Parse(next)
		if err != nil || u.Path != "/cdx" {
			t.Fatalf("rel=next %q: %v", next, err)
		}
		b, _ := cdxAnswer(t, srv, u.RawQuery)
		mementos += strings.Count(b, `rel="memento"`)
		i := strings.Index(b, `>; rel="next"`)
		if i < 0 {
			break
		}
		next = b[strings.LastIndex(b[:i], "<")+1 : i]
	}
	if mementos != 30 {
		t.Errorf("the TimeMaps linked by rel=next hold %d mementos, want 30", mementos)
	}
	// Ending exactly at the limit, or the cap: nothing more, no key.
	for _, q := range []string{"url=example.com/ten&showResumeKey=true", "url=example.com/ten&limit=10&output=json",
		"url=example.com/page&limit=7&showResumeKey=true&resumeKey=" + url.QueryEscape(pageLines[22])} {
		b, h := cdxAnswer(t, srv, q)
		if strings.Contains(b, "\n\n") || h.Get("Archivist-Resume-Key") != "" || h.Get("Archivist-Lines-Read-Cap") != "" {
			t.Errorf("%s: an answer that ends at its limit is marked cut: %v\n%s", q, h, b)
		}
	}
	// The Internet Archive's own form of a key, "urlkey timestamp!",
	// resumes after that second.
	b, _ := cdxAnswer(t, srv, "url=example.com/page&fl=digest&limit=2&resumeKey="+url.QueryEscape("com,example)/page 20260101000100!"))
	if b != "D04\nD05\n" {
		t.Errorf("resumed after an Internet Archive key: %q", b)
	}
}

// TestResumeKeysWalkADomain: a domain query reads two key ranges (the
// host's own keys and its subdomains'); resuming its answer crosses from
// one to the other with no line lost or repeated.
func TestResumeKeysWalkADomain(t *testing.T) {
	var index []string
	for _, host := range []string{"com,example)", "com,example,mail)", "com,example,www)", "com,examples)"} {
		for i := range 3 {
			index = append(index, fmt.Sprintf("%s/p%d 20260101000000 http://x/ text/html 200 D - - 10 %d a.warc.gz", host, i, i))
		}
	}
	srv, _, _ := dialectServer(t, 2, 1000, index)
	var got []string
	key := ""
	for range 20 {
		q := "url=example.com&matchType=domain&limit=2&showResumeKey=true&fl=urlkey"
		if key != "" {
			q += "&resumeKey=" + key
		}
		body, h := cdxAnswer(t, srv, q)
		lines, _, _ := strings.Cut(body, "\n\n")
		got = append(got, strings.Fields(lines)...)
		if key = h.Get("Archivist-Resume-Key"); key == "" {
			break
		}
	}
	want := []string{"com,example)/p0", "com,example)/p1", "com,example)/p2", "com,example,mail)/p0", "com,example,mail)/p1", "com,example,mail)/p2",
		"com,example,www)/p0", "com,example,www)/p1", "com,example,www)/p2"}
	if !slices.Equal(got, want) {
		t.Errorf("a domain walked by resume keys:\n got %v\nwant %v", got, want)
	}
}
