package aggregator

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAccessPointsHaveTheirOwnRules: an access point answers the CDX API
// for its view: captures younger than its embargo hidden, its own
// exclusions applied beside the takedowns, each client held to its rate
// (429 with Retry-After); staff's /cdx sees everything but the takedowns;
// a takedown hides its captures from every view at once; the summary
// (showPagedIndex) is staff's; an unknown access point is a 404 naming the
// others, and an exclusion for one a 400.
func TestAccessPointsHaveTheirOwnRules(t *testing.T) {
	recent := time.Now().UTC().Add(-24 * time.Hour).Format("20060102150405")
	index := []string{
		"com,example)/ 20200101000000 http://example.com/ text/html 200 OLD - - 10 0 a.warc.gz",
		"com,example)/ " + recent + " http://example.com/ text/html 200 NEW - - 10 10 a.warc.gz",
		"com,example)/gone 20200101000000 http://example.com/gone text/html 200 GONE - - 10 20 a.warc.gz",
		"com,example)/private 20200101000000 http://example.com/private text/html 200 PRIV - - 10 30 a.warc.gz",
	}
	var ps AccessPoints
	if err := ps.EnvDecode("public:embargo=30:rate=0.1:burst=12, reading-room"); err != nil {
		t.Fatal(err)
	}
	srv, _, a := dialectServer(t, 2, 1000, index)
	a.points = points(ps)
	for _, e := range []string{
		`{"url": "http://example.com/gone", "reason": "a takedown"}`,
		`{"url": "http://example.com/private", "reason": "not for the public", "access_point": "public"}`,
	} {
		if code, body := send(t, "POST", srv.URL+"/v1/index/exclusions", e); code != 201 {
			t.Fatalf("%s: %d %s", e, code, body)
		}
	}
	digests := func(path string) string {
		t.Helper()
		code, body := send(t, "GET", srv.URL+path+"?url=example.com/*&fl=digest", "")
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		return strings.Join(strings.Fields(body), " ")
	}
	for path, want := range map[string]string{
		"/public/cdx":       "OLD",          // the embargo, the takedown, its own exclusion
		"/reading-room/cdx": "OLD NEW PRIV", // the takedown alone
		"/cdx":              "OLD NEW PRIV", // staff's: the takedown alone
	} {
		if got := digests(path); got != want {
			t.Errorf("%s answers %q, want %q", path, got, want)
		}
	}
	// A public TimeMap, JSON, a closest and a reverse query keep the embargo.
	for q, notWant := range map[string]string{
		"url=example.com&output=link":                    recent[:8],
		"url=example.com&output=json":                    "NEW",
		"url=example.com&closest=" + recent + "&limit=1": "NEW",
		"url=example.com&sort=reverse&limit=1":           "NEW",
		"url=example.com&to=2099":                        "NEW",
	} {
		if code, body := send(t, "GET", srv.URL+"/public/cdx?"+q, ""); code != 200 || strings.Contains(body, notWant) || body == "" {
			t.Errorf("/public/cdx?%s: %d %q, want the embargoed capture hidden", q, code, body)
		}
	}
	// A page keeps the embargo too.
	if code, body := send(t, "GET", srv.URL+"/public/cdx?url=example.com/*&page=0&fl=digest", ""); code != 200 || strings.Join(strings.Fields(body), " ") != "OLD" {
		t.Errorf("a public page: %d %q, want OLD alone", code, body)
	}
	if code, body := send(t, "GET", srv.URL+"/public/cdx?url=example.com&showPagedIndex=true", ""); code != 403 || !strings.Contains(body, "staff's") {
		t.Errorf("showPagedIndex at an access point: %d %s", code, body)
	}
	if code, body := send(t, "GET", srv.URL+"/nope/cdx?url=example.com", ""); code != 404 || !strings.Contains(body, "public, reading-room") {
		t.Errorf("an unknown access point: %d %s", code, body)
	}
	if code, body := send(t, "POST", srv.URL+"/v1/index/exclusions", `{"url": "http://example.com/", "reason": "x", "access_point": "nope"}`); code != 400 || !strings.Contains(body, "public, reading-room") {
		t.Errorf("an exclusion for an unknown access point: %d %s", code, body)
	}
	// pywb's rules for the public collection: the takedown and its own.
	_, acl := send(t, "GET", srv.URL+"/v1/index/exclusions?format=aclj&access_point=public", "")
	_, staff := send(t, "GET", srv.URL+"/v1/index/exclusions?format=aclj", "")
	if !strings.Contains(acl, "com,example)/private") || !strings.Contains(acl, "com,example)/gone") || strings.Contains(staff, "private") || !strings.Contains(staff, "gone") {
		t.Errorf("ACL for public:\n%s\nfor staff:\n%s", acl, staff)
	}
	// The rate: a burst of 12, one query in ten seconds after, then 429
	// with Retry-After (the queries above spent some of it).
	refused := 0
	for range 13 {
		resp, err := http.Get(srv.URL + "/public/cdx?url=example.com")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
			if resp.Header.Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
		}
	}
	if refused == 0 {
		t.Error("13 queries at once over a burst of 12: none refused")
	}
	// Staff's view has no rate of the access point's.
	for range 20 {
		if code, _ := send(t, "GET", srv.URL+"/cdx?url=example.com", ""); code != 200 {
			t.Fatalf("staff's query refused: %d", code)
		}
	}
}

// TestAccessPointsAreConfiguredStrictly: AGGREGATOR_ACCESS_POINTS is read
// strictly, a mistake named.
func TestAccessPointsAreConfiguredStrictly(t *testing.T) {
	var ps AccessPoints
	if err := ps.EnvDecode("public:embargo=365:rate=10:burst=40,staff-room"); err != nil || len(ps) != 2 ||
		ps[0] != (AccessPoint{Name: "public", EmbargoDays: 365, Rate: 10, Burst: 40}) || ps[1].Name != "staff-room" {
		t.Fatalf("%+v, %v", ps, err)
	}
	for spec, want := range map[string]string{
		"Public":             "lower-case",
		"v1":                 "not v1",
		"a,a":                "named twice",
		"public:embargo=x":   "embargo=x",
		"public:rate=-1":     "negative",
		"public:burst=0":     "at least 1",
		"public:colour=blue": "unknown",
	} {
		if err := ps.EnvDecode(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", spec, err, want)
		}
	}
}
