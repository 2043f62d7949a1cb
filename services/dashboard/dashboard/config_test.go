package dashboard

import (
	"strings"
	"testing"
)

// TestKeysCrossNoNetworkInClear (N40): the dashboard forwards each
// person's key to every API, so an API on another machine is asked over
// https; plain http only on this machine, or where allowed (compose, one
// machine's network).
func TestKeysCrossNoNetworkInClear(t *testing.T) {
	cfg := func(scheme, host string) Config {
		u := scheme + "://" + host
		return Config{CuratorURL: u + ":8080", PWAURL: u + ":8081", AuditorURL: u + ":8082", IndexerURL: u + ":8083", AggregatorURL: u + ":8084"}
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{cfg("http", "curator"), "https"},
		{cfg("http", "10.0.0.7"), "https"},
		{cfg("https", "curator"), ""},
		{cfg("http", "127.0.0.1"), ""},
		{cfg("http", "localhost"), ""},
	} {
		err := c.cfg.checkURLs()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.cfg.CuratorURL, err, c.want)
		}
	}
	plain := cfg("http", "curator")
	plain.AllowPlainHTTP = true
	if err := plain.checkURLs(); err != nil {
		t.Errorf("with DASHBOARD_ALLOW_PLAIN_HTTP: %v", err)
	}
}
