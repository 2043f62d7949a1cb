package events_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/archivist/archivist/events"
)

// TestCDXFileNameIsTheKey: every key has a name of its own, with no space
// (a CDX field), and the name read as a URL path is the key again.
func TestCDXFileNameIsTheKey(t *testing.T) {
	keys := []string{
		"warcs/crawl.warc.gz",
		"objects/ark:99999%2Ffk4abc/v1/producer/crawl.warc.gz",
		"objects/ark:99999%2Ffk4abc/v2/producer/crawl.warc.gz",
		"objects/ark:99999%2Ffk4abd/v1/producer/crawl.warc.gz",
		"objects/ark:99999%2Ffk4abc/v1/producer/a b#c?.warc.gz",
		"objects/ark:99999%2Ffk4abc/v1/producer/a%20b#c?.warc.gz",
		"objects/x/v1/producer/été.warc.gz",
	}
	seen := map[string]string{}
	for _, k := range keys {
		n := events.CDXFileName(k)
		if strings.ContainsAny(n, " \t\n#?") {
			t.Errorf("%q: name %q has a space, '#' or '?'", k, n)
		}
		if other, ok := seen[n]; ok {
			t.Errorf("%q and %q share the name %q", k, other, n)
		}
		seen[n] = k
		u, err := url.Parse("http://store.example/" + n)
		if err != nil || strings.TrimPrefix(u.Path, "/") != k {
			t.Errorf("%q: name %q read as a URL path is %q (%v)", k, n, u.Path, err)
		}
	}
	if got := events.CDXFileName("warcs/crawl-00.warc.gz"); got != "warcs/crawl-00.warc.gz" {
		t.Errorf("a plain key's name: %q", got)
	}
}
