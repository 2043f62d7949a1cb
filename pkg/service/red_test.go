package service

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAPIMetricsPerRoute: every request is counted by the route its
// ServeMux matched (the pattern, not the path: ids make no series), its
// method and status, refused ones included, and timed; a publisher's route
// still needs only the publisher role behind the measuring.
func TestAPIMetricsPerRoute(t *testing.T) {
	reader, readerLine := apiauth.NewKey("reader", []apiauth.Role{apiauth.Reader}, "")
	pub, pubLine := apiauth.NewKey("pub", []apiauth.Role{apiauth.Publisher}, "src")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(readerLine+"\n"+pubLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := httpauth.New(httpauth.Config{Mode: "keys", KeysFile: file, RateLimit: 1000, RateBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.Error(w, "no such thing", http.StatusNotFound)
		}
	})
	mux.HandleFunc("POST /v1/records", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	routes := httpauth.PublisherRoutes(mux, "POST /v1/records")
	reg := prometheus.NewRegistry()
	m := newHTTPMetrics(reg)
	h := m.measure(a.Wrap(routes), routes)
	do := func(method, path, key string) int {
		req := httptest.NewRequest(method, path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, c := range []struct {
		method, path, key string
		want              int
	}{
		{"GET", "/v1/things/1", reader, 200},
		{"GET", "/v1/things/2", reader, 200},
		{"GET", "/v1/things/missing", reader, 404},
		{"GET", "/v1/things/3", "", 401},
		{"GET", "/nowhere", reader, 404},
		{"POST", "/v1/records", pub, 202},
	} {
		if got := do(c.method, c.path, c.key); got != c.want {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
	for _, c := range []struct {
		route, method, code string
		want                float64
	}{
		{"GET /v1/things/{id}", "GET", "200", 2},
		{"GET /v1/things/{id}", "GET", "404", 1},
		{"GET /v1/things/{id}", "GET", "401", 1},
		{"unmatched", "GET", "404", 1},
		{"POST /v1/records", "POST", "202", 1},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.route, c.method, c.code)); got != c.want {
			t.Errorf("archivist_http_requests_total{route=%q,method=%q,code=%q} = %v, want %v", c.route, c.method, c.code, got, c.want)
		}
	}
	// The dashboard's routes are behind its sign-in page.
	if got := routeOf(httpauth.Browser(mux), httptest.NewRequest("GET", "/v1/things/7", nil)); got != "GET /v1/things/{id}" {
		t.Errorf("the route of a Browser handler's request: %q", got)
	}
	if n := testutil.CollectAndCount(m.duration); n != 3 {
		t.Errorf("duration series: %d, want one per route and method (3)", n)
	}
	if got := testutil.CollectAndCount(m.requests); got != 5 {
		t.Errorf("request series: %d, want 5 (no series per id)", got)
	}
}

// TestMadeUpMethodsMakeNoLabels (N23): a client that has not
// authenticated sends 300 requests, each with a method of its own making;
// the method label keeps to the methods HTTP defines and "OTHER", so the
// series do not grow with what clients send.
func TestMadeUpMethodsMakeNoLabels(t *testing.T) {
	a, err := httpauth.New(httpauth.Config{Mode: "keys", KeysFile: writeKeys(t), RateLimit: 1000, RateBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things", func(http.ResponseWriter, *http.Request) {})
	reg := prometheus.NewRegistry()
	m := newHTTPMetrics(reg)
	srv := httptest.NewServer(m.measure(a.Wrap(mux), mux))
	defer srv.Close()
	for i := range 300 {
		req, err := http.NewRequest(fmt.Sprintf("AAAA%dXYZ", i), srv.URL+"/v1/things", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a request with method %s and no key: %d, want 401", req.Method, resp.StatusCode)
		}
	}
	methods := map[string]bool{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "method" {
					methods[l.GetValue()] = true
				}
			}
		}
	}
	if len(methods) > 12 || !methods["OTHER"] {
		t.Errorf("method label values after 300 made-up methods: %d (%v), want at most a dozen, OTHER among them", len(methods), methods)
	}
}

// writeKeys writes a keys file with one reader key and returns its path.
func writeKeys(t *testing.T) string {
	t.Helper()
	_, line := apiauth.NewKey("reader", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// BenchmarkAPIMetrics: what measuring costs a request, beside the same
// request unmeasured (a ServeMux route with a path value, through
// httptest): docs/PERFORMANCE.md gives the ratio.
func BenchmarkAPIMetrics(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.PathValue("id"))) })
	m := newHTTPMetrics(prometheus.NewRegistry())
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"plain", mux}, {"measured", m.measure(mux, mux)}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/v1/things/42", nil)
			for b.Loop() {
				c.h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
