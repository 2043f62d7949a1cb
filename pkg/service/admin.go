package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Admin is the admin HTTP server of a process: /healthz (the process is
// alive), /readyz (it has started, its dependencies answer, and it is not
// shutting down) and /metrics (Prometheus).
type Admin struct {
	// Registry holds the process's metrics.
	Registry *prometheus.Registry

	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	// registered is set once any service has begun: until then the
	// process is not ready (the admin server listens before the services
	// start).
	registered bool
	checks     map[string]func(context.Context) error
	pending    map[string]string // service → what it waits for ("" starting)
	shutdown   atomic.Bool
}

// NewAdmin listens on addr (host:port; port 0 picks one) and serves.
func NewAdmin(addr string, log *slog.Logger) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen on %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a := &Admin{Registry: reg, ln: ln, checks: map[string]func(context.Context) error{}, pending: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	a.srv = NewHTTPServer(mux, DefaultHTTPLimits, log)
	go func() {
		// Bounded as the APIs are: the probes and Prometheus need few.
		if err := a.srv.Serve(limitListener(ln, 64, 16)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", "err", err)
		}
	}()
	return a, nil
}

// Addr is the address the admin server listens on.
func (a *Admin) Addr() string { return a.ln.Addr().String() }

// AddCheck adds a readiness check, run on every /readyz.
func (a *Admin) AddCheck(name string, check func(context.Context) error) {
	a.mu.Lock()
	a.checks[name] = check
	a.mu.Unlock()
}

// Starting records that name has not yet started; /readyz fails until
// Started(name).
func (a *Admin) Starting(name string) {
	a.mu.Lock()
	a.pending[name] = ""
	a.registered = true
	a.mu.Unlock()
}

// Waiting records what a starting service waits for; /readyz says it.
func (a *Admin) Waiting(name, reason string) {
	a.mu.Lock()
	if _, ok := a.pending[name]; ok {
		a.pending[name] = reason
	}
	a.mu.Unlock()
}

// Started records that name is ready.
func (a *Admin) Started(name string) {
	a.mu.Lock()
	delete(a.pending, name)
	a.mu.Unlock()
}

// ShuttingDown makes /readyz fail from now on.
func (a *Admin) ShuttingDown() { a.shutdown.Store(true) }

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.shutdown.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	a.mu.Lock()
	registered := a.registered
	var pending []string
	for n, why := range a.pending {
		if why != "" {
			n += " (" + why + ")"
		}
		pending = append(pending, n)
	}
	checks := make(map[string]func(context.Context) error, len(a.checks))
	for n, c := range a.checks {
		checks[n] = c
	}
	a.mu.Unlock()
	if !registered {
		http.Error(w, "starting: no service has begun yet", http.StatusServiceUnavailable)
		return
	}
	if len(pending) > 0 {
		http.Error(w, fmt.Sprintf("starting: %v", pending), http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	for n, c := range checks {
		if err := c(ctx); err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", n, err), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

// Close stops the admin server.
func (a *Admin) Close(ctx context.Context) error {
	return a.srv.Shutdown(ctx)
}
