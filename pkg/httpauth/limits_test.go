package httpauth

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/archivist/archivist/pkg/apiauth"
)

// TestEachKeyHasARateLimit: a caller over API_RATE_LIMIT (its burst spent)
// gets 429 with Retry-After, and other callers are served meanwhile.
func TestEachKeyHasARateLimit(t *testing.T) {
	busy, busyLine := apiauth.NewKey("busy", []apiauth.Role{apiauth.Reader}, "")
	calm, calmLine := apiauth.NewKey("calm", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(busyLine+"\n"+calmLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mode: "keys", KeysFile: file, RateLimit: 0.5, RateBurst: 3})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(testRoutes())
	get := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 3 {
		if rec := get(busy); rec.Code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i+1, rec.Code)
		}
	}
	rec := get(busy)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a request beyond the burst: %d, want 429", rec.Code)
	}
	if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s < 1 || s > 2 {
		t.Errorf("Retry-After %q, want the 1 to 2 seconds until a request is allowed", rec.Header().Get("Retry-After"))
	}
	if rec := get(calm); rec.Code != http.StatusOK {
		t.Errorf("another key meanwhile: %d", rec.Code)
	}
}

// TestOnlyAllowedHostsAreServed: with API_ALLOWED_HOSTS set, a request
// naming another host (a page of another site resolving to this machine:
// DNS rebinding) is refused before its key is looked at, with or without
// authentication.
func TestOnlyAllowedHostsAreServed(t *testing.T) {
	key, line := apiauth.NewKey("viewer", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"keys", "off"} {
		a, err := New(Config{Mode: mode, KeysFile: file, AllowedHosts: []string{"localhost", "127.0.0.1", "::1", "curator"}})
		if err != nil {
			t.Fatal(err)
		}
		h := a.Wrap(testRoutes())
		for host, want := range map[string]int{"localhost:18080": 200, "127.0.0.1:18080": 200, "[::1]:18080": 200, "curator:18080": 200, "CURATOR": 200,
			"evil.example:18080": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest, "127.0.0.1.evil.example": http.StatusMisdirectedRequest} {
			req := httptest.NewRequest("GET", "/v1/status", nil)
			req.Host = host
			req.Header.Set("Authorization", "Bearer "+key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("API_AUTH=%s, Host %s: %d, want %d", mode, host, rec.Code, want)
			}
		}
	}
}

// BenchmarkAuthenticatedRequest: what a request pays for its key's check,
// with and without the per-key rate limit and the Host check.
//
//	go test -run '^$' -bench AuthenticatedRequest ./pkg/service/
func BenchmarkAuthenticatedRequest(b *testing.B) {
	key, line := apiauth.NewKey("viewer", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(b.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"plain", Config{Mode: "keys", KeysFile: file}},
		{"rate-limit-and-hosts", Config{Mode: "keys", KeysFile: file, RateLimit: 1e9, RateBurst: 1e9, AllowedHosts: []string{"localhost", "127.0.0.1", "::1", "curator"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			a, err := New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			h := a.Wrap(testRoutes())
			req := httptest.NewRequest("GET", "/v1/status", nil)
			req.Host = "curator:18080"
			req.Header.Set("Authorization", "Bearer "+key)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
