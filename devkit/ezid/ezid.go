// Package ezid is an EZID server in small, for tests: the requests and
// answers of EZID's API as its documentation gives them
// (https://ezid.cdlib.org/doc/apidoc): HTTP Basic credentials, ANVL
// bodies, "success: ..." and "error: ..." answers; mint in a shoulder
// (POST /shoulder/SHOULDER), create (PUT /id/ID), modify (POST /id/ID)
// and get (GET /id/ID). Identifiers live in memory. Faults on demand: an
// outage (503 to every request) and lost answers (the request done, the
// connection closed before the answer).
package ezid

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a running EZID in small.
type Server struct {
	// URL is where it answers.
	URL string
	// User and Password are the one account it knows.
	User, Password string

	srv  *httptest.Server
	mu   sync.Mutex
	ids  map[string]map[string]string
	seq  int
	down atomic.Bool
	lose atomic.Int32
	// Creates counts the identifiers made (minted or created).
	Creates atomic.Int64
}

// Start starts a server for one account.
func Start(user, password string) *Server {
	s := &Server{User: user, Password: password, ids: map[string]map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetDown makes every request answer 503 (down) or be served again.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// LoseAnswers has the next n requests done but their answers lost.
func (s *Server) LoseAnswers(n int) { s.lose.Store(int32(n)) }

// Hold gives the server identifier id, owned by owner (another account's,
// say), as if it had been made before.
func (s *Server) Hold(id, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = map[string]string{"_owner": owner, "_status": "public"}
}

// Identifier is id's metadata, or nil if it has none.
func (s *Server) Identifier(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.ids[id]
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Identifiers lists every identifier held, sorted.
func (s *Server) Identifiers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.ids))
	for id := range s.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		answer(w, http.StatusServiceUnavailable, "error: service unavailable")
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != s.User || p != s.Password {
		w.Header().Set("WWW-Authenticate", `Basic realm="EZID"`)
		answer(w, http.StatusUnauthorized, "error: unauthorized")
		return
	}
	var meta map[string]string
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			answer(w, http.StatusBadRequest, "error: bad request - unsupported content type")
			return
		}
		var err error
		if meta, err = parseANVL(io.LimitReader(r.Body, 1<<20)); err != nil {
			answer(w, http.StatusBadRequest, "error: bad request - ANVL parse error ("+err.Error()+")")
			return
		}
	}
	path := r.URL.EscapedPath()
	code, text := s.act(r.Method, path, meta)
	if s.lose.Load() > 0 && s.lose.Add(-1) >= 0 {
		// Done, and the answer lost on the way back.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	answer(w, code, text)
}

func (s *Server) act(method, path string, meta map[string]string) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case method == http.MethodPost && strings.HasPrefix(path, "/shoulder/"):
		shoulder, err := url.PathUnescape(strings.TrimPrefix(path, "/shoulder/"))
		if err != nil || !strings.HasPrefix(shoulder, "ark:/") {
			return http.StatusBadRequest, "error: bad request - unrecognized shoulder"
		}
		var id string
		for {
			s.seq++
			id = fmt.Sprintf("%sm%06d", shoulder, s.seq)
			if _, taken := s.ids[id]; !taken {
				break
			}
		}
		s.store(id, meta)
		return http.StatusCreated, "success: " + id
	case strings.HasPrefix(path, "/id/"):
		id, err := url.PathUnescape(strings.TrimPrefix(path, "/id/"))
		if err != nil || !strings.HasPrefix(id, "ark:/") {
			return http.StatusBadRequest, "error: bad request - invalid identifier"
		}
		cur, exists := s.ids[id]
		switch method {
		case http.MethodPut:
			if exists {
				return http.StatusBadRequest, "error: bad request - identifier already exists"
			}
			s.store(id, meta)
			return http.StatusCreated, "success: " + id
		case http.MethodPost:
			if !exists {
				return http.StatusBadRequest, "error: bad request - no such identifier"
			}
			for k, v := range meta {
				if strings.HasPrefix(k, "_") && k != "_target" && k != "_status" && k != "_profile" {
					return http.StatusBadRequest, "error: bad request - element '" + k + "' is read-only"
				}
				cur[k] = v
			}
			cur["_updated"] = fmt.Sprint(time.Now().Unix())
			return http.StatusOK, "success: " + id
		case http.MethodGet:
			if !exists {
				return http.StatusBadRequest, "error: bad request - no such identifier"
			}
			keys := make([]string, 0, len(cur))
			for k := range cur {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var b strings.Builder
			b.WriteString("success: " + id + "\n")
			for _, k := range keys {
				fmt.Fprintf(&b, "%s: %s\n", escape(k, true), escape(cur[k], false))
			}
			return http.StatusOK, strings.TrimSuffix(b.String(), "\n")
		}
	}
	return http.StatusMethodNotAllowed, "error: method not allowed"
}

// store keeps a new identifier with its owner and times.
func (s *Server) store(id string, meta map[string]string) {
	m := map[string]string{}
	for k, v := range meta {
		m[k] = v
	}
	now := fmt.Sprint(time.Now().Unix())
	m["_owner"], m["_created"], m["_updated"] = s.User, now, now
	if m["_status"] == "" {
		m["_status"] = "public"
	}
	s.ids[id] = m
	s.Creates.Add(1)
}

func answer(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(code)
	io.WriteString(w, text+"\n")
}

// parseANVL reads "name: value" lines, percent-decoding both.
func parseANVL(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		i := strings.IndexByte(line, ':')
		if i < 0 {
			return nil, fmt.Errorf("no colon in %q", line)
		}
		k, err := url.PathUnescape(strings.TrimSpace(line[:i]))
		if err != nil {
			return nil, err
		}
		v, err := url.PathUnescape(strings.TrimSpace(line[i+1:]))
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, sc.Err()
}

// escape percent-encodes as ANVL asks: '%', line ends, and in names ':'.
func escape(s string, name bool) string {
	s = strings.NewReplacer("%", "%25", "\n", "%0A", "\r", "%0D").Replace(s)
	if name {
		s = strings.ReplaceAll(s, ":", "%3A")
	}
	return s
}
