package service

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/httpauth"
)

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
	a, err := httpauth.New(httpauth.Config{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	go ServeHTTP(ctx, "127.0.0.1:0", a.Wrap(statusRoutes()), HTTPLimits{MaxConns: 8, MaxConnsPerClient: 2}, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second,
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

// statusRoutes is an API of one route, GET /v1/status, for readers.
func statusRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {})
	return httpauth.RoutesOf(mux)
}
