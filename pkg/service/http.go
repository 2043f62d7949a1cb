package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/telemetry"
)

// HTTPLimits bounds what one client can hold of an API server: how long it
// may take to send a request and to read the response, how long an idle
// connection stays open, how large the request headers may be, and how
// many connections are open at once (further ones wait in the kernel's
// backlog). Every API is served with them.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration `env:"HTTP_READ_HEADER_TIMEOUT, default=10s"`
	// ReadTimeout bounds reading a whole request, body included (a trickled
	// body is cut off).
	ReadTimeout time.Duration `env:"HTTP_READ_TIMEOUT, default=1m"`
	// WriteTimeout bounds writing a response.
	WriteTimeout time.Duration `env:"HTTP_WRITE_TIMEOUT, default=2m"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration `env:"HTTP_IDLE_TIMEOUT, default=2m"`
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int `env:"HTTP_MAX_HEADER_BYTES, default=65536"`
	// MaxConns bounds the connections served at once.
	MaxConns int `env:"HTTP_MAX_CONNS, default=512"`
	// MaxConnsPerClient bounds the connections of one client address
	// (further ones are closed at once): one client cannot take every slot.
	// Behind a proxy every client is the proxy: raise it to MaxConns there.
	MaxConnsPerClient int `env:"HTTP_MAX_CONNS_PER_CLIENT, default=64"`
	// TLSCertFile and TLSKeyFile, when set, have the API speak TLS only,
	// with this certificate, read again when the files change (a
	// cert-manager renewal): keys and sessions never cross the network in
	// clear, a dashboard's forwarded keys included.
	TLSCertFile string `env:"API_TLS_CERT_FILE"`
	TLSKeyFile  string `env:"API_TLS_KEY_FILE"`
}

// DefaultHTTPLimits are HTTPLimits' defaults, for servers started without
// a configuration (tests, tools).
var DefaultHTTPLimits = HTTPLimits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       time.Minute,
	WriteTimeout:      2 * time.Minute,
	IdleTimeout:       2 * time.Minute,
	MaxHeaderBytes:    64 << 10,
	MaxConns:          512,
	MaxConnsPerClient: 64,
}

func (l HTTPLimits) orDefaults() HTTPLimits {
	d := DefaultHTTPLimits
	orDefault(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	orDefault(&l.ReadTimeout, d.ReadTimeout)
	orDefault(&l.WriteTimeout, d.WriteTimeout)
	orDefault(&l.IdleTimeout, d.IdleTimeout)
	orDefault(&l.MaxHeaderBytes, d.MaxHeaderBytes)
	orDefault(&l.MaxConns, d.MaxConns)
	orDefault(&l.MaxConnsPerClient, d.MaxConnsPerClient)
	return l
}

// orDefault sets *v to d unless *v is positive.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// NewHTTPServer is the http.Server every Archivist API and admin server
// runs: lim's timeouts and header bound, and handlers whose panics answer
// 500 with an error id that is in the log (Recover).
func NewHTTPServer(h http.Handler, lim HTTPLimits, log *slog.Logger) *http.Server {
	lim = lim.orDefaults()
	return &http.Server{
		Handler:           Recover(h, log),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// Recover answers a request whose handler panics with 500 and a JSON body
// {"error": "internal error", "error_id": ID}, and logs the panic, its
// stack and the same id; the server goes on serving. A panic of
// http.ErrAbortHandler is passed on (it aborts the response on purpose).
func Recover(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			id := reply.ErrorID()
			log.Error("http handler panicked", "panic", v, "error_id", id, "method", r.Method, "path", r.URL.Path, "stack", string(debug.Stack()))
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error", "error_id": id})
		}()
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves h on addr until ctx ends, then shuts down within
// timeout. ready is called with the address once it listens (port 0 picks
// one). The server keeps lim (see NewHTTPServer), with at most
// lim.MaxConns connections open, lim.MaxConnsPerClient of one address.
func ServeHTTP(ctx context.Context, addr string, h http.Handler, lim HTTPLimits, log *slog.Logger, timeout time.Duration, ready func(addr string)) error {
	lim = lim.orDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := NewHTTPServer(h, lim, log)
	limited := limitListener(ln, lim.MaxConns, lim.MaxConnsPerClient)
	if lim.TLSCertFile != "" || lim.TLSKeyFile != "" {
		certs, err := newCertReloader(lim.TLSCertFile, lim.TLSKeyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("API_TLS_CERT_FILE, API_TLS_KEY_FILE: %w", err)
		}
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}
		limited = tls.NewListener(limited, srv.TLSConfig)
	}
	ready(ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limited) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server on %s: %w", addr, err)
		}
		return nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// certReloader serves a certificate from files, read again when either
// changes (checked at most once a second).
type certReloader struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	stamp             string
	checked           time.Time
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("both are needed for TLS")
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.get(nil); err != nil {
		return nil, err
	}
	return r, nil
}

// get is a tls.Config's GetCertificate.
func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && time.Since(r.checked) < time.Second {
		return r.cert, nil
	}
	r.checked = time.Now()
	var stamp string
	for _, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil // mid-rotation: the old one until the new is whole
			}
			return nil, err
		}
		stamp += st.ModTime().String() + fmt.Sprint(st.Size())
	}
	if stamp == r.stamp {
		return r.cert, nil
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil
		}
		return nil, err
	}
	r.cert, r.stamp = &c, stamp
	return r.cert, nil
}

// Loop is a service's background work: it runs until its context ends.
type Loop func(ctx context.Context) error

// Every is a Loop that calls fn every interval (not at once).
func Every(interval time.Duration, fn func(ctx context.Context)) Loop {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				fn(ctx)
			}
		}
	}
}

// Serve runs a service's loops and serves its API on addr, logging
// "<api> listening" and reporting ready once it listens. When the API stops
// (ctx ended, or it could not listen) the loops are cancelled and waited
// for, then each stopper (a subscription's Stop) runs within the shutdown
// timeout. Every error is returned, joined.
func (e *Env) Serve(ctx context.Context, api, addr string, h http.Handler, loops []Loop, stoppers ...func(context.Context) error) error {
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(loops))
	for _, l := range loops {
		go func() { errs <- l(lctx) }()
	}
	err := e.ServeHTTP(ctx, addr, h, func(a string) {
		e.Log.InfoContext(ctx, api+" listening", "addr", a)
		e.Ready()
	})
	stop()
	for range loops {
		err = errors.Join(err, <-errs)
	}
	sctx, cancel := context.WithTimeout(context.Background(), e.ShutdownTimeout)
	defer cancel()
	for _, s := range stoppers {
		err = errors.Join(err, s(sctx))
	}
	return err
}

// ServeHTTP serves h on addr with the service's HTTP limits and shutdown
// timeout (see the package function ServeHTTP), every request
// authenticated as API_AUTH says: a request without a known key is a 401
// before h sees it, and h's routes Require the role they need.
func (e *Env) ServeHTTP(ctx context.Context, addr string, h http.Handler, ready func(addr string)) error {
	auth, err := httpauth.New(e.Auth)
	if err != nil {
		return fmt.Errorf("%s API: %w", e.Name, err)
	}
	if e.Auth.Mode == "off" {
		e.Log.WarnContext(ctx, "API authentication is off (API_AUTH=off): anyone who reaches the API may use it")
	}
	auth.Log = e.Log
	if e.Metrics != nil {
		auth.ReloadFailures = telemetry.Register(e.Metrics, prometheus.NewCounter(prometheus.CounterOpts{Name: "archivist_api_keys_reload_failures_total",
			Help: "Changes of API_KEYS_FILE that could not be loaded (the previous keys stayed in force)."}))
	}
	if e.admin != nil {
		e.admin.AddCheck(e.Name+" API keys", auth.KeysHealth)
	}
	// Every request is a span (a caller's traceparent continued), around
	// its authentication.
	// And measured per route (RED), refused requests included.
	var measured http.Handler = auth.Wrap(h)
	if e.Metrics != nil {
		m := newHTTPMetrics(e.Metrics)
		measured = m.measure(measured, h)
	}
	traced := otelhttp.NewHandler(measured, e.Name+" API", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return r.Method + " " + e.Name + " API"
	}))
	return ServeHTTP(ctx, addr, traced, e.HTTP, e.Log, e.ShutdownTimeout, ready)
}
