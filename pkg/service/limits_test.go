package service

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	a, err := newAuthenticator(AuthConfig{Mode: "keys", KeysFile: file, RateLimit: 0.5, RateBurst: 3})
	if err != nil {
		t.Fatal(err)
	}
	h := a.wrap(testRoutes())
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

// TestConnectionsAreBoundedPerClient: one client cannot hold the API from
// everyone: its connections beyond HTTP_MAX_CONNS_PER_CLIENT are closed at
// once, and a connection whose request is refused (401) is closed after
// the answer, never kept alive idle.
func TestConnectionsAreBoundedPerClient(t *testing.T) {
	ks, line := apiauth.NewKey("viewer", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := newAuthenticator(AuthConfig{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	go ServeHTTP(ctx, "127.0.0.1:0", a.wrap(testRoutes()), HTTPLimits{MaxConns: 8, MaxConnsPerClient: 2}, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second,
		func(addr string) { addrc <- addr })
	addr := <-addrc
	request := func(c net.Conn, key string) *http.Response {
		t.Helper()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		req := "GET /v1/status HTTP/1.1\r\nHost: x\r\n"
		if key != "" {
			req += "Authorization: Bearer " + key + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// A refused request's connection is closed by the server.
	c := dial()
	if resp := request(c, ""); resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("without a key: %d, close %v; want 401 and the connection closed", resp.StatusCode, resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the refused connection after its answer: %v, want EOF", err)
	}
	// Two kept-alive connections of one client are served; a third is
	// closed at once.
	c1, c2 := dial(), dial()
	for _, c := range []net.Conn{c1, c2} {
		if resp := request(c, ks); resp.StatusCode != http.StatusOK {
			t.Fatalf("a key's request: %d", resp.StatusCode)
		}
	}
	c3 := dial()
	c3.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c3, "GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ks+"\r\n\r\n")
	if b, err := io.ReadAll(io.LimitReader(c3, 1<<16)); err != nil && !strings.Contains(err.Error(), "reset") || len(b) > 0 {
		t.Errorf("a third connection of one client: read %q %v, want it closed unanswered", b, err)
	}
	// Once one closes, the client may connect again.
	c1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c4 := dial()
		c4.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c4, "GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ks+"\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c4), nil); err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection after one was closed")
		}
		time.Sleep(50 * time.Millisecond)
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
		a, err := newAuthenticator(AuthConfig{Mode: mode, KeysFile: file, AllowedHosts: []string{"localhost", "127.0.0.1", "::1", "curator"}})
		if err != nil {
			t.Fatal(err)
		}
		h := a.wrap(testRoutes())
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
		cfg  AuthConfig
	}{
		{"plain", AuthConfig{Mode: "keys", KeysFile: file}},
		{"rate-limit-and-hosts", AuthConfig{Mode: "keys", KeysFile: file, RateLimit: 1e9, RateBurst: 1e9, AllowedHosts: []string{"localhost", "127.0.0.1", "::1", "curator"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			a, err := newAuthenticator(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			h := a.wrap(testRoutes())
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
