package aggregator

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

func lines(ts ...string) []string {
	var out []string
	for _, t := range ts {
		out = append(out, "com,example)/ "+t+" http://example.com/ text/html 200 AAAA - - 10 0 f.warc.gz")
	}
	return out
}

func timestamps(ls []string) []string {
	var out []string
	for _, l := range ls {
		out = append(out, strings.Fields(l)[1])
	}
	return out
}

func TestOrder(t *testing.T) {
	index := []string{"20200101000000", "20210601000000", "20220101000000", "20220102000000", "20240101000000"}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"url=example.com", index},
		{"url=example.com&limit=2", index[:2]},
		{"url=example.com&sort=reverse&limit=2", []string{"20240101000000", "20220102000000"}},
		{"url=example.com&sort=closest&closest=20220101120000", []string{"20220101000000", "20220102000000", "20210601000000", "20240101000000", "20200101000000"}},
		{"url=example.com&sort=closest&closest=2022&limit=1", []string{"20220101000000"}},
		{"url=example.com&sort=closest&closest=20990101000000&limit=2", []string{"20240101000000", "20220102000000"}},
	} {
		v, _ := url.ParseQuery(c.query)
		r, err := parseRequest(v)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if got := timestamps(r.order(lines(index...))); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.query, got, c.want)
		}
	}
}

func TestBadRequestsSayWhatIsWrong(t *testing.T) {
	for q, want := range map[string]string{
		"":                                         "url is required",
		"url=a.com&matchType=bogus":                "matchType",
		"url=a.com&limit=-1":                       "limit",
		"url=a.com&sort=sideways":                  "sort: reverse or closest",
		"url=a.com&sort=closest&closest=x":         "closest: a timestamp",
		"url=a.com&from=2020-01":                   "from: a timestamp",
		"url=a.com&fl=urlkey,nope":                 `unknown field "nope"`,
		"url=a.com&output=xml":                     "output: cdx (or text), cdxj, json or link",
		"url=a.com&filter=nope:x":                  `filter: unknown field "nope"`,
		"url=a.com&filter=~urlkey:(":               "is not a regular expression",
		"url=a.com&collapse=nope":                  "collapse: FIELD",
		"url=a.com&collapse=urlkey:x":              "collapse: FIELD:N",
		"url=a.com&collapseTime=15":                "collapseTime",
		"url=a.com&page=-1":                        "page: a page number",
		"url=a.com&pageSize=0":                     "pageSize: blocks per page",
		"url=a.com&showNumPages=maybe":             "showNumPages: true or false",
		"url=a.com&reverse=maybe":                  "reverse: true or false",
		"url=a.com&page=0&showResumeKey=true":      "no sort, no page",
		"url=a.com&sort=reverse&resumeKey=a+b":     "no sort, no page",
		"url=a.com&resumeKey=nospace":              "resumeKey: the key",
		"url=a.com&collapse=urlkey&collapseTime=4": "one of them",
	} {
		v, _ := url.ParseQuery(q)
		_, err := parseRequest(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", q, err, want)
		}
	}
}

func TestTimestampPrefixesAreTheEarliestMoment(t *testing.T) {
	for in, want := range map[string]string{
		"2026":           "2026-01-01T00:00:00Z",
		"202603":         "2026-03-01T00:00:00Z",
		"20260315123456": "2026-03-15T12:34:56Z",
		"20261399":       "2026-01-01T00:00:00Z",
	} {
		if got := timestampTime(in).Format("2006-01-02T15:04:05Z07:00"); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// FuzzParseRequest: no query string makes the CDX query parser panic; a
// query it accepts names a key, and a limit it keeps is not negative.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"url=example.com", "url=com&matchType=domain&limit=1", "url=a.com/x&matchType=prefix&from=2020&to=2021",
		"url=a.com&sort=closest&closest=20200101", "url=a.com&fl=urlkey,timestamp&output=json", "url=&limit=-1", "url=%zz", "matchType=host",
		"url=a.com&output=link&showResumeKey=true", "url=*.a.com&resumeKey=a+b&fl=k,t", "url=a.com&showPagedIndex=1&output=json",
		"url=a.com&closest=2020&sort=reverse&collapseTime=4", "url=a.com/*&fields=original,s&from_ts=2020&reverse=on"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		r, err := parseRequest(v)
		if err != nil {
			return
		}
		if r.q.Key == "" || r.limit < 0 {
			t.Fatalf("%q: key %q, limit %d", raw, r.q.Key, r.limit)
		}
		_ = r.order([]string{"a 20200101000000 x", "a 20210101000000 y", "b"})
	})
}

// TestWildcardsAreMatchTypes: pywb's URL wildcards, as its CDXQuery reads
// them when no matchType is given: "*.example.com" is matchType=domain of
// example.com, "example.com/*" matchType=prefix of example.com/; with a
// matchType the URL is taken as it is.
func TestWildcardsAreMatchTypes(t *testing.T) {
	for wild, plain := range map[string]string{
		"url=*.example.com":             "url=example.com&matchType=domain",
		"url=example.com/*":             "url=example.com/&matchType=prefix",
		"url=http://example.com/a/*":    "url=http://example.com/a/&matchType=prefix",
		"url=example.com/page*&limit=3": "url=example.com/page&matchType=prefix&limit=3",
	} {
		wv, _ := url.ParseQuery(wild)
		pv, _ := url.ParseQuery(plain)
		w, err := parseRequest(wv)
		if err != nil {
			t.Fatalf("%s: %v", wild, err)
		}
		p, err := parseRequest(pv)
		if err != nil {
			t.Fatalf("%s: %v", plain, err)
		}
		if w.q != p.q || w.domain != p.domain || w.limit != p.limit {
			t.Errorf("%s reads as %+v (domain %q), %s as %+v (domain %q)", wild, w.q, w.domain, plain, p.q, p.domain)
		}
	}
	v, _ := url.ParseQuery("url=example.com/*&matchType=exact")
	if r, err := parseRequest(v); err != nil || r.q.Prefix || r.q.Key != "com,example)/*" {
		t.Errorf("a * with matchType=exact: %+v, %v; want the URL as it is", r, err)
	}
}
