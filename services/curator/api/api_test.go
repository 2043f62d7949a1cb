package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/migrations"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// serve is the API over a fresh database and bus; caller, when set, is
// the identity every request comes from.
func serve(t *testing.T, caller *apiauth.Identity) *httptest.Server {
	t.Helper()
	b := testenv.Bus(t, "curator")
	log := testenv.Logger(t)
	cat := catalog.New(testenv.DB(t, migrations.Schema), prometheus.NewRegistry(), log)
	h := api.New(b, cat, log).Handler()
	if caller != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r.WithContext(apiauth.WithCaller(r.Context(), *caller)))
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// episode is a valid episode's JSON with id and source.
func episode(id, source string) string {
	return fmt.Sprintf(`{"id": %q, "source": %q, "title": "t", "media": {"key": "audio/%s.wav", "sha256": %q}, "duration_ms": 60000,
		"initial_curated_at": "2026-01-02T15:04:05Z", "latest_curated_at": "2026-01-02T15:04:05Z"}`, id, source, id, sha)
}

// post sends body and decodes the answer into out (nil: none). A 503 (the
// bus or the database slow to answer on a loaded machine) is retried, as
// the API asks of its callers, for up to a minute.
func post(t *testing.T, url, contentType, body string, header map[string]string, out any) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			t.Logf("POST %s: %s %s; retrying", url, resp.Status, data)
			continue
		}
		if resp.StatusCode >= 300 {
			t.Logf("POST %s: %s %s", url, resp.Status, data)
		}
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("POST %s: %s: %v in %q", url, resp.Status, err, data)
			}
		}
		return resp.StatusCode
	}
}

// TestBadRequestsSayWhatIsWrong: every malformed or invalid body gets the
// 4xx that fits, naming the field where there is one; nothing is published.
func TestBadRequestsSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	srv := serve(t, nil)
	future, err := uuid.NewV7FromReader(bytes.NewReader(make([]byte, 16)))
	if err != nil {
		t.Fatal(err)
	}
	// A UUIDv7 whose time is a day ahead.
	ts := uint64(time.Now().Add(24 * time.Hour).UnixMilli())
	for i := range 6 {
		future[i] = byte(ts >> (40 - 8*i))
	}
	for _, c := range []struct {
		name, contentType, body string
		header                  map[string]string
		status                  int
		field, says             string
	}{
		{"empty", "", "", nil, 400, "", "empty body"},
		{"not JSON", "application/json", "{", nil, 400, "", "invalid JSON"},
		{"two values", "", episode("a", "s") + episode("b", "s"), nil, 400, "", "more than one JSON value"},
		{"unknown field", "", `{"id": "a", "colour": "red"}`, nil, 400, "colour", "unknown field"},
		{"wrong type", "", `{"id": 7}`, nil, 400, "id", "must be a string"},
		{"no media", "", `{"id": "a", "title": "t"}`, nil, 400, "media.key", "required"},
		{"content type", "text/plain", episode("a", "s"), nil, 415, "", "application/json or application/msgpack"},
		{"too large", "", `{"id": "` + strings.Repeat("x", api.MaxBody) + `"}`, nil, 413, "", "larger than"},
		{"bad key", "", episode("a", "s"), map[string]string{"Idempotency-Key": "has space"}, 400, "Idempotency-Key", "whitespace"},
		{"future key", "", episode("a", "s"), map[string]string{"Idempotency-Key": future.String()}, 400, "Idempotency-Key", "in the future"},
	} {
		var p api.Problem
		status := post(t, srv.URL+"/v1/episodes", c.contentType, c.body, c.header, &p)
		if status != c.status || p.Field != c.field || !strings.Contains(p.Error, c.says) {
			t.Errorf("%s: %d %+v; want %d, field %q, saying %q", c.name, status, p, c.status, c.field, c.says)
		}
	}
}

// TestAPostIsPublishedOnce: a valid record is accepted and published; the
// same Idempotency-Key again is the same event, a duplicate on the bus.
func TestAPostIsPublishedOnce(t *testing.T) {
	t.Parallel()
	srv := serve(t, nil)
	var first, again api.Accepted
	key := map[string]string{"Idempotency-Key": "retry-1"}
	if s := post(t, srv.URL+"/v1/episodes", "", episode("ep1", "bbc"), key, &first); s != 202 || first.Duplicate || first.Sequence == 0 {
		t.Fatalf("first post: %d %+v", s, first)
	}
	if s := post(t, srv.URL+"/v1/episodes", "", episode("ep1", "bbc"), key, &again); s != 202 || !again.Duplicate || again.ID != first.ID || again.Sequence != first.Sequence {
		t.Errorf("the retry: %d %+v; want the first's event, a duplicate", s, again)
	}
	resp, err := http.Get(srv.URL + "/v1/episodes/bbc:nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown record: %s, want 404", resp.Status)
	}
}

// TestAPublisherPublishesAsItsSource: a publisher's record carries its
// own source; naming another's is forbidden; an operator may.
func TestAPublisherPublishesAsItsSource(t *testing.T) {
	t.Parallel()
	pub := serve(t, &apiauth.Identity{Name: "radio-feed", Roles: []apiauth.Role{apiauth.Publisher}, Source: "radio"})
	var p api.Problem
	if s := post(t, pub.URL+"/v1/clips", "", episode("c1", "tv"), nil, &p); s != 403 || p.Field != "source" {
		t.Errorf("a publisher naming another source: %d %+v; want 403 on source", s, p)
	}
	var a api.Accepted
	if s := post(t, pub.URL+"/v1/clips", "", episode("c1", ""), nil, &a); s != 202 {
		t.Errorf("a publisher's own record: %d %+v", s, a)
	}
	op := serve(t, &apiauth.Identity{Name: "ops", Roles: []apiauth.Role{apiauth.Operator, apiauth.Publisher}, Source: "radio"})
	if s := post(t, op.URL+"/v1/clips", "", episode("c1", "tv"), nil, &p); s != 202 {
		t.Errorf("an operator correcting another source's record: %d %+v", s, p)
	}
}
