// Package dashboard is the operator's page of the whole system: research,
// ingest, indexing, audit and curation side by side, with the dead letters
// and every consumer's backlog, refreshed live; a click on an item shows
// its history (and trace id, where tracing is on).
//
// The dashboard keeps no state and reads no other service's tables: it
// asks each service's API on its caller's behalf (the caller's key or
// token is passed on, so each API checks the caller's own role), and it
// looks at JetStream as its own read-only NATS user (events.dashboardPermissions).
package dashboard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/service"
)

// Config is the dashboard's configuration.
type Config struct {
	// HTTPAddr is where the pages are served.
	HTTPAddr string `env:"DASHBOARD_HTTP_ADDR, default=:8090"`
	// The APIs it asks (their defaults are the compose and Kubernetes
	// Service names).
	CuratorURL    string `env:"DASHBOARD_CURATOR_URL, default=http://curator:8080"`
	PWAURL        string `env:"DASHBOARD_PWA_URL, default=http://pwa:8081"`
	AuditorURL    string `env:"DASHBOARD_AUDITOR_URL, default=http://auditor:8082"`
	IndexerURL    string `env:"DASHBOARD_INDEXER_URL, default=http://indexer:8083"`
	AggregatorURL string `env:"DASHBOARD_AGGREGATOR_URL, default=http://aggregator:8084"`
	// Refresh is how often an open page reads the pipelines again.
	Refresh time.Duration `env:"DASHBOARD_REFRESH, default=5s"`
	// CallTimeout bounds each call to an API: a service that does not
	// answer shows as such, the rest of the page does not wait.
	CallTimeout time.Duration `env:"DASHBOARD_CALL_TIMEOUT, default=3s"`
	// FreshnessGoal is the index freshness the indexing panel marks as
	// late (the spec's goal: a file answered within minutes).
	FreshnessGoal time.Duration `env:"DASHBOARD_FRESHNESS_GOAL, default=10m"`
	// TLSCAFile is the CA the APIs' certificates are checked against
	// (their https URLs; default: the system's roots).
	TLSCAFile string `env:"DASHBOARD_TLS_CA_FILE"`
	// AllowPlainHTTP lets the dashboard ask APIs over http:// on other
	// machines: it forwards each person's key, an operator's included, so
	// only on a network of one machine (compose). APIs on this machine
	// (127.0.0.1, localhost) are always allowed.
	AllowPlainHTTP bool `env:"DASHBOARD_ALLOW_PLAIN_HTTP, default=false"`
}

// checkURLs refuses an API URL over which a key would cross a network in
// clear (N40).
func (cfg Config) checkURLs() error {
	for name, u := range map[string]string{"DASHBOARD_CURATOR_URL": cfg.CuratorURL, "DASHBOARD_PWA_URL": cfg.PWAURL, "DASHBOARD_AUDITOR_URL": cfg.AuditorURL,
		"DASHBOARD_INDEXER_URL": cfg.IndexerURL, "DASHBOARD_AGGREGATOR_URL": cfg.AggregatorURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%s %q is not an http(s) URL", name, u)
		}
		host := p.Hostname()
		ip := net.ParseIP(host)
		if p.Scheme == "http" && !cfg.AllowPlainHTTP && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("%s %q: the dashboard forwards each person's key, so another machine's API is asked over https (DASHBOARD_TLS_CA_FILE; DASHBOARD_ALLOW_PLAIN_HTTP on a network of one machine)", name, u)
		}
	}
	return nil
}

// httpClient is the client the dashboard asks the APIs with: their
// certificates checked against DASHBOARD_TLS_CA_FILE when set.
func (cfg Config) httpClient() (*http.Client, error) {
	c := &http.Client{Timeout: cfg.CallTimeout}
	if cfg.TLSCAFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(cfg.TLSCAFile)
	if err != nil {
		return nil, fmt.Errorf("DASHBOARD_TLS_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("DASHBOARD_TLS_CA_FILE %s holds no PEM certificate", cfg.TLSCAFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.Transport = tr
	return c, nil
}

// Definition is the dashboard service.
func Definition() service.Definition {
	return service.Definition{
		Name:        "dashboard",
		Summary:     "serves the operator's dashboard: the five pipelines on one page, live, each item's history",
		NeedsBus:    true,
		ObservesBus: true,
		Config:      new(Config),
		Run: func(ctx context.Context, env *service.Env) error {
			var cfg Config
			if err := env.LoadConfig(ctx, &cfg); err != nil {
				return err
			}
			if err := cfg.checkURLs(); err != nil {
				return err
			}
			d := New(cfg, env.Bus, env.Log)
			client, err := cfg.httpClient()
			if err != nil {
				return err
			}
			d.client = client
			return env.Serve(ctx, "dashboard", cfg.HTTPAddr, httpauth.Browser(d.Handler()), nil)
		},
	}
}

// Dashboard serves the pages.
type Dashboard struct {
	cfg    Config
	bus    *bus.Bus
	log    *slog.Logger
	client *http.Client
}

// New returns a dashboard asking the APIs cfg names and looking at b.
func New(cfg Config, b *bus.Bus, log *slog.Logger) *Dashboard {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 3 * time.Second
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	return &Dashboard{cfg: cfg, bus: b, log: log, client: &http.Client{Timeout: cfg.CallTimeout}}
}

//go:embed templates/*.html
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":   ago,
	"since": func(t time.Time) string { return ago(time.Since(t)) },
	"secs":  func(s float64) string { return ago(time.Duration(s * float64(time.Second))) },
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"hkind": historyKind,
	"list":  func(s ...string) []string { return s },
	"hid":   historyID,
	"pct": func(n, of int64) int64 {
		if of <= 0 {
			return 0
		}
		return 100 * n / of
	},
	// nonce is the response's CSP nonce (render binds it on a clone).
	"nonce": func() string { return "" },
}).ParseFS(files, "templates/*.html"))

// Handler serves the dashboard:
//
//	GET /                      the page (its panels refresh every DASHBOARD_REFRESH)
//	GET /panels                the panels alone (what the page refreshes with)
//	GET /item?kind=K&id=ID     an item's history: episode, batch, job, file, object, deadletter
//	GET /work?<filter>         the work a filter matches, across the pipelines
//	POST /work/act             a verb on what a filter matches: its dry run, then the action
//	GET /work/actions          the action log
//	GET /mine                  a depositor's own batches: their place in the queue, their estimated end
//	GET /login, POST /login, POST /logout   (httpauth.Browser)
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		snap := d.Snapshot(r.Context())
		d.render(w, "page", map[string]any{"Snap": snap, "RefreshMS": d.cfg.Refresh.Milliseconds()})
	})
	mux.HandleFunc("GET /panels", func(w http.ResponseWriter, r *http.Request) {
		d.render(w, "panels", d.Snapshot(r.Context()))
	})
	mux.HandleFunc("GET /item", d.item)
	// The console: find work, act on what a filter matches, the log.
	mux.HandleFunc("GET /work", d.workPage)
	mux.HandleFunc("POST /work/act", d.workAct)
	mux.HandleFunc("GET /work/actions", d.workActions)
	// A depositor's own batches, where they stand in the queue.
	mux.HandleFunc("GET /mine", d.mine)
	return httpauth.RoutesOf(mux).Depositor("POST /work/act").Publisher("GET /mine")
}

// render executes a template; a failure half-way is logged (the status is
// already sent).
func (d *Dashboard) render(w http.ResponseWriter, name string, data any) {
	// A nonce per response: only the page's own <style> and <script> run,
	// never one a record's text smuggles in, and no inline attribute.
	nonce := httpauth.Nonce()
	t, err := pages.Clone()
	if err != nil {
		d.log.Error("rendering the dashboard", "template", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	t.Funcs(template.FuncMap{"nonce": func() string { return nonce }})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", httpauth.PageCSP(nonce)+"; connect-src 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		d.log.Error("rendering the dashboard", "template", name, "err", err)
	}
}

// itemSources says which API tells an item kind's history.
func (d *Dashboard) itemSource(kind string) (api, base, path, param string, ok bool) {
	switch kind {
	case "episode":
		return "pwa", d.cfg.PWAURL, "/v1/research/history", "episode", true
	case "batch", "job":
		return "curator", d.cfg.CuratorURL, "/v1/ingest/history", kind, true
	case "file":
		return "indexer", d.cfg.IndexerURL, "/v1/index/history", "file", true
	case "object":
		return "auditor", d.cfg.AuditorURL, "/v1/audit/history", "object", true
	}
	return "", "", "", "", false
}

// item shows one item's history.
func (d *Dashboard) item(w http.ResponseWriter, r *http.Request) {
	kind, id := r.URL.Query().Get("kind"), r.URL.Query().Get("id")
	data := map[string]any{"Kind": kind, "ID": id}
	fail := func(code int, msg string) {
		w.WriteHeader(code)
		data["Error"] = msg
		d.render(w, "item", data)
	}
	if id == "" || len(id) > 1024 {
		fail(http.StatusBadRequest, "id names the item (at most 1,024 bytes)")
		return
	}
	if kind == "deadletter" {
		if caller, _ := apiauth.Caller(r.Context()); !caller.Has(apiauth.Operator) {
			fail(http.StatusForbidden, "dead letters are shown to operators: their subjects and reasons name every tenant's work")
			return
		}
		seq, err := strconv.ParseUint(id, 10, 64)
		if err != nil || seq == 0 {
			fail(http.StatusBadRequest, "a dead letter's id is its sequence number")
			return
		}
		h, err := d.deadLetterHistory(r.Context(), seq)
		if errors.Is(err, errNoLetter) {
			fail(http.StatusNotFound, err.Error())
			return
		} else if err != nil {
			eid := reply.ErrorID()
			d.log.Error("reading a dead letter", "seq", seq, "err", err, "error_id", eid)
			fail(http.StatusBadGateway, "the dead letters could not be read (error "+eid+")")
			return
		}
		data["History"] = h
		d.render(w, "item", data)
		return
	}
	api, base, path, param, ok := d.itemSource(kind)
	if !ok {
		fail(http.StatusBadRequest, "kind is episode, batch, job, file, object or deadletter")
		return
	}
	var h service.History
	if err := d.get(r.Context(), api, base, path+"?"+param+"="+urlQueryEscape(id), &h); err != nil {
		code := http.StatusBadGateway
		if isNotFound(err) {
			code = http.StatusNotFound
		}
		fail(code, err.Error())
		return
	}
	data["History"] = h
	d.render(w, "item", data)
}
