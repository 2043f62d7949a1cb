// Package fetch is the safe HTTP client of ingest: every request made of a
// depositor's server (a manifest read, a HEAD, a download, a callback)
// goes through it. Every connection's address is checked against IANA's
// special-purpose registries when it is made, hosts may be limited to a
// list, a silent body is cut off, and a download never exceeds what the
// manifest declares, the file size bound, or the working area's room.
package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"code.dny.dev/ssrf"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// Config is the client's configuration (the INGEST_* variables of the
// same names; see the ingest pipeline's Config).
type Config struct {
	// AllowedHosts, when set, are the only hosts (comma-separated).
	AllowedHosts string
	// AllowPrivate allows loopback and private addresses (dev, tests).
	AllowPrivate bool
	// HTTPProxy, if set, is the proxy every request goes through.
	HTTPProxy string
	// ResponseTimeout bounds the wait for a response's headers;
	// IdleTimeout fails a body that stalls this long; RequestTimeout
	// bounds a whole callback.
	ResponseTimeout, IdleTimeout, RequestTimeout time.Duration
	// MinThroughput fails a body that brings fewer bytes a second than
	// this over a ThroughputWindow (0: no bound): a trickle holds a
	// worker for a window, not for the step's six hours.
	MinThroughput    int64
	ThroughputWindow time.Duration
	// Retries is how many times a download or callback is tried.
	Retries int
	// MaxFileBytes refuses larger files.
	MaxFileBytes int64
	// WorkDir is the working area downloads go to; a download whose size
	// was not declared stops once it leaves less than MinFreeBytes free.
	WorkDir      string
	MinFreeBytes int64
}

// Client makes ingest's requests.
type Client struct {
	cfg Config
	hc  *http.Client
}

// New makes a client.
func New(cfg Config) (*Client, error) {
	c := &Client{cfg: cfg}
	// Every connection's address is checked when it is made (after DNS,
	// so a name that resolves to a private address is refused too) against
	// IANA's special-purpose registries, IPv4 forms embedded in IPv6
	// included: code.dny.dev/ssrf.
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = DialGuard
	}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          128,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.ResponseTimeout,
		ExpectContinueTimeout: time.Second,
	}
	if cfg.HTTPProxy != "" {
		pu, err := url.Parse(cfg.HTTPProxy)
		if err != nil || pu.Host == "" {
			return nil, fmt.Errorf("INGEST_HTTP_PROXY %q is not a URL", cfg.HTTPProxy)
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	c.hc = &http.Client{Transport: tr, Timeout: 0, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return c.Allowed(r.URL.String())
	}}
	return c, nil
}

// DialGuard refuses, before a connection is made, every address that is
// not a public unicast one (loopback, private, shared, link-local,
// benchmarking, reserved, documentation, multicast, NAT64, 6to4, Teredo,
// IPv4-mapped and -compatible forms of those...), from IANA's
// special-purpose address registries, for any port. It is the ingest
// client's net.Dialer Control unless INGEST_ALLOW_PRIVATE.
var DialGuard = ssrf.New(ssrf.WithAnyPort()).Safe

// Do sends req: its response must start within INGEST_RESPONSE_TIMEOUT
// (the transport's bound), and its body fails once no byte has come for
// INGEST_IDLE_TIMEOUT, so a silent origin server holds a worker for a
// bounded time.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := c.hc.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	body := newIdleBody(resp.Body, c.cfg.IdleTimeout, cancel)
	if c.cfg.MinThroughput > 0 && c.cfg.ThroughputWindow > 0 {
		body.minRate, body.window, body.winStart = c.cfg.MinThroughput, c.cfg.ThroughputWindow, time.Now()
	}
	resp.Body = body
	return resp, nil
}

// ErrTooSlow is a body that came slower than INGEST_MIN_THROUGHPUT.
var ErrTooSlow = errors.New("the origin sent its body slower than INGEST_MIN_THROUGHPUT")

// idleBody cancels its request when one Read waits longer than d, or
// (minRate > 0) when a window passes with fewer than minRate bytes a
// second.
type idleBody struct {
	rc     io.ReadCloser
	d      time.Duration
	t      *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
	// The throughput bound: the current window's start and bytes.
	minRate  int64
	window   time.Duration
	winStart time.Time
	winBytes int64
}

func newIdleBody(rc io.ReadCloser, d time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{rc: rc, d: d, cancel: cancel}
	if d > 0 {
		b.t = time.AfterFunc(time.Hour, func() { b.fired.Store(true); cancel() })
		b.t.Stop()
	}
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	var n int
	var err error
	if b.t == nil {
		n, err = b.rc.Read(p)
	} else {
		b.t.Reset(b.d)
		n, err = b.rc.Read(p)
		b.t.Stop()
		if err != nil && b.fired.Load() {
			err = fmt.Errorf("no data for %s (INGEST_IDLE_TIMEOUT): %w", b.d, err)
		}
	}
	if b.minRate > 0 && err == nil {
		b.winBytes += int64(n)
		if took := time.Since(b.winStart); took >= b.window {
			if rate := float64(b.winBytes) / took.Seconds(); rate < float64(b.minRate) {
				b.cancel()
				return n, fmt.Errorf("%w: %.0f bytes a second over %s, at least %d wanted", ErrTooSlow, rate, took.Round(time.Second), b.minRate)
			}
			b.winStart, b.winBytes = time.Now(), 0
		}
	}
	return n, err
}

func (b *idleBody) Close() error {
	if b.t != nil {
		b.t.Stop()
	}
	err := b.rc.Close()
	b.cancel()
	return err
}

// Allowed refuses a URL that is not http(s), or whose host is not in
// INGEST_ALLOWED_HOSTS when that is set.
func (c *Client) Allowed(s string) error {
	if err := manifest.CheckURL(s); err != nil {
		return err
	}
	if c.cfg.AllowedHosts == "" {
		return nil
	}
	u, _ := url.Parse(s)
	for _, h := range strings.Split(c.cfg.AllowedHosts, ",") {
		if strings.EqualFold(strings.TrimSpace(h), u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("host %s is not in INGEST_ALLOWED_HOSTS", u.Hostname())
}

// Open opens a document (a manifest) for streaming its body.
func (c *Client) Open(ctx context.Context, u string) (io.ReadCloser, error) {
	if err := c.Allowed(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp.Body, nil
}

// originStatus marks an origin's answer: a 4xx (but for 408 Request
// Timeout, 425 Too Early and 429 Too Many Requests) says the request is
// wrong and will stay wrong: permanent; a 5xx or one of those may pass.
func originStatus(err error, code int) error {
	if code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooEarly && code != http.StatusTooManyRequests {
		return fault.Permanent(err)
	}
	return err
}

// PostRetrying posts body (JSON) to u up to INGEST_RETRIES times, waiting
// longer after each failure; it returns the last failure.
func (c *Client) PostRetrying(ctx context.Context, u string, body []byte) error {
	var last error
	for try := range max(c.cfg.Retries, 1) {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try*try) * 200 * time.Millisecond):
			}
		}
		if last = c.post(ctx, u, body); last == nil {
			return nil
		}
	}
	return last
}

func (c *Client) post(ctx context.Context, u string, body []byte) error {
	if err := c.Allowed(u); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return originStatus(fmt.Errorf("POST %s: %s", u, resp.Status), resp.StatusCode)
	}
	return nil
}
