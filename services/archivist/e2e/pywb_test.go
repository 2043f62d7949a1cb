package e2e_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/indexer/warc/warctest"
)

// TestPywbRemoteIndexRecipe: the pywb configuration the repository ships
// (deploy/pywb/config.yaml) works against the running index, asked as
// pywb asks it. The test reads the collection's api_url and archive_paths
// from the file and makes pywb's own requests: its CDXQuery's match type
// (a trailing * is a prefix), RemoteIndexSource's template filled by
// res_template (the URL quoted as Python's quote does, the timestamp for
// {closest}, empty for a calendar) and "&limit=10" when a time is asked;
// it reads each answer as CDXObject reads a line (11 fields), finds each
// file as PathIndexResolver does (the name, a tab, its locations, in the
// path index copied as the file says), and reads the record at its offset
// and length as pywb's loader does: a gzip member holding the capture's
// WARC record. The access point's view is what pywb sees: a takedown is
// not found.
func TestPywbRemoteIndexRecipe(t *testing.T) {
	ctx := context.Background()
	conf, err := os.ReadFile("../../../deploy/pywb/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	apiURL := regexp.MustCompile(`(?m)^      api_url: "([^"]+)"`).FindSubmatch(conf)
	paths := regexp.MustCompile(`(?m)^    archive_paths: (\S+)`).FindSubmatch(conf)
	if apiURL == nil || paths == nil || !strings.HasPrefix(string(apiURL[1]), "http://aggregator:8084/public/cdx?") {
		t.Fatalf("deploy/pywb/config.yaml: no collection with the public access point's api_url and a path index:\n%s", conf)
	}
	bs, api := indexing(t, "AGGREGATOR_ACCESS_POINTS", "public")
	template := strings.Replace(string(apiURL[1]), "http://aggregator:8084", api, 1)
	bs.Put(ctx, "warcs/crawl.warc.gz", bytes.NewReader(warctest.Gzipped("www.example.com", 6)), nil)
	bs.Put(ctx, "warcs/taken.warc.gz", bytes.NewReader(warctest.Gzipped("taken.example.org", 2)), nil)

	// pywb's request for url (with its wildcard) and closest ("" for a
	// calendar), and the lines it reads from the answer.
	pywb := func(url, closest string) []map[string]string {
		t.Helper()
		matchType := "exact" // CDXQuery: no matchType given
		if strings.HasSuffix(url, "*") {
			url, matchType = url[:len(url)-1], "prefix"
		}
		q := strings.NewReplacer("{url}", pyQuote(url), "{closest}", closest, "{matchType}", matchType).Replace(template)
		if closest != "" {
			q += "&limit=10" // RemoteIndexSource's closest_limit
		}
		resp, err := http.Get(q) // no key: pywb sends none
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != 200 {
			t.Fatalf("pywb's request %s: %d %s", q, resp.StatusCode, body)
		}
		var out []map[string]string
		for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			if line == "" {
				continue
			}
			f := strings.Split(line, " ")
			if len(f) != 11 {
				t.Fatalf("pywb reads %q as a %d-field CDX line: it knows no such format", line, len(f))
			}
			cdx := map[string]string{}
			for i, name := range []string{"urlkey", "timestamp", "url", "mime", "status", "digest", "redirect", "robotflags", "length", "offset", "filename"} {
				cdx[name] = f[i]
			}
			out = append(out, cdx)
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(pywb("http://www.example.com/*", "")) != 6 || len(pywb("http://taken.example.org/*", "")) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the crawls are not answered after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The path index, copied as the file's comment says.
	req, _ := http.NewRequest("GET", api+"/v1/index/paths", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	index, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("path index: %d %s", resp.StatusCode, index)
	}
	locate := func(name string) string {
		t.Helper()
		sc := bufio.NewScanner(bytes.NewReader(index))
		for sc.Scan() {
			if f := strings.Split(sc.Text(), "\t"); len(f) > 1 && f[0] == name {
				return f[1]
			}
		}
		t.Fatalf("the path index names no %s:\n%s", name, index)
		return ""
	}

	// Replay: the capture nearest a time, loaded from its file.
	got := pywb("http://www.example.com/p/3", "20260304000000")
	if len(got) != 1 || got[0]["url"] != "http://www.example.com/p/3" || got[0]["timestamp"] != "20260304000000" {
		t.Fatalf("replay lookup: %v", got)
	}
	loc := locate(got[0]["filename"])
	if !filepath.IsAbs(loc) {
		t.Fatalf("a local store's location %q is not a path", loc)
	}
	f, err := os.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var off, length int64
	fmt.Sscan(got[0]["offset"], &off)
	fmt.Sscan(got[0]["length"], &length)
	zr, err := gzip.NewReader(io.NewSectionReader(f, off, length))
	if err != nil {
		t.Fatalf("the record at %d+%d of %s: %v", off, length, loc, err)
	}
	rec, _ := io.ReadAll(io.LimitReader(zr, 1<<20))
	if !bytes.HasPrefix(rec, []byte("WARC/1.0\r\n")) || !bytes.Contains(rec, []byte("WARC-Target-URI: http://www.example.com/p/3\r\n")) {
		t.Errorf("the record pywb would load:\n%s", rec)
	}
	// The calendar: every capture, in time order.
	if cal := pywb("http://www.example.com/p/1", ""); len(cal) != 1 {
		t.Errorf("calendar of /p/1: %v", cal)
	}
	// A takedown: pywb finds nothing.
	resp, err = http.Post(api+"/v1/index/exclusions", "application/json", strings.NewReader(`{"url": "http://taken.example.org/", "reason": "a takedown"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("takedown: %v %v", err, resp)
	}
	resp.Body.Close()
	if got := pywb("http://taken.example.org/p/0", "20260301000000"); len(got) != 0 {
		t.Errorf("a takedown still found by pywb: %v", got)
	}
}

// pyQuote is Python's urllib.parse.quote(s) (safe "/"): every byte but
// letters, digits, "_.-~" and "/" as %XX.
func pyQuote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.-~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
