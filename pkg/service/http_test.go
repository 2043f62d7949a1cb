package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/service"
)

// serve runs h under lim on a free port until the test ends.
func serve(t *testing.T, h http.Handler, lim service.HTTPLimits, log *bytes.Buffer) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	logger := testenv.Logger(t)
	if log != nil {
		logger = slogTo(log)
	}
	go func() {
		done <- service.ServeHTTP(ctx, "127.0.0.1:0", h, lim, logger, 5*time.Second, func(a string) { addrc <- a })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addrc:
		return a
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

func TestHandlerPanicAnswers500WithAnIDInTheLog(t *testing.T) {
	var log bytes.Buffer
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			var m map[string]int
			m["x"] = 1 // assignment to a nil map
		}
		fmt.Fprint(w, "fine")
	}), service.DefaultHTTPLimits, &log)
	resp, err := http.Get("http://" + addr + "/boom")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error   string `json:"error"`
		ErrorID string `json:"error_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 500 || body.Error != "internal error" || body.ErrorID == "" {
		t.Fatalf("got %d %+v", resp.StatusCode, body)
	}
	if !strings.Contains(log.String(), body.ErrorID) || !strings.Contains(log.String(), "nil map") {
		t.Errorf("log lacks the error id %s or the panic:\n%s", body.ErrorID, log.String())
	}
	if strings.Contains(fmt.Sprint(body), "nil map") {
		t.Errorf("the panic's text reached the client")
	}
	resp, err = http.Get("http://" + addr + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fine" {
		t.Errorf("server did not go on serving: %q", b)
	}
}

func TestTrickledBodyAndIdleConnectionsAreCutOff(t *testing.T) {
	lim := service.DefaultHTTPLimits
	lim.ReadTimeout = 300 * time.Millisecond
	lim.IdleTimeout = 300 * time.Millisecond
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "ok")
	}), lim, nil)

	// A body sent a byte a second: the server closes the connection.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	start := time.Now()
	closed := false
	for range 20 {
		if _, err := c.Write([]byte("a")); err != nil {
			closed = true
			break
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 512)
		if _, err := c.Read(buf); err != nil && !isTimeout(err) {
			closed = true
			break
		}
	}
	if !closed {
		t.Errorf("a trickled body kept its connection for %s", time.Since(start))
	}

	// An idle keep-alive connection is closed.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c2); err != nil {
		t.Errorf("idle connection not closed by the server: %v", err)
	}
}

func TestConnectionsAreCapped(t *testing.T) {
	lim := service.DefaultHTTPLimits
	lim.MaxConns = 2
	lim.ReadHeaderTimeout = 5 * time.Second
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }), lim, nil)
	// Two silent connections hold both slots.
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(100 * time.Millisecond)
	client := http.Client{Timeout: 500 * time.Millisecond}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Fatal("a third connection was served while two were held")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// slogTo logs JSON lines into buf (safe for the server's goroutines).
func slogTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(&lockedWriter{w: buf}, nil))
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
