package service

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
)

// limitListener bounds ln's connections: at most total open at once
// (further ones wait in the kernel's backlog), and at most perClient from
// one address (further ones are closed at once), so that one client cannot
// take every slot and hold the API from everyone else.
func limitListener(ln net.Listener, total, perClient int) net.Listener {
	return &clientLimited{Listener: netutil.LimitListener(ln, total), per: perClient, open: map[string]int{}}
}

type clientLimited struct {
	net.Listener
	per  int
	mu   sync.Mutex
	open map[string]int // by remote IP
}

func (l *clientLimited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteHost(c)
		l.mu.Lock()
		if l.open[host] >= l.per {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &clientConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.open[host]--; l.open[host] <= 0 {
				delete(l.open, host)
			}
			l.mu.Unlock()
		}}, nil
	}
}

func remoteHost(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// RateLimits bound each caller's requests: a token bucket per caller (its
// name: an identity, a client address), perSecond requests a second with
// bursts of burst. Buckets of callers idle for ten minutes are dropped.
type RateLimits struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	buckets   map[string]*bucket
	swept     time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewRateLimits bounds each caller to perSecond requests a second (0:
// unbounded), with bursts of burst.
func NewRateLimits(perSecond float64, burst int) *RateLimits {
	return &RateLimits{perSecond: perSecond, burst: burst}
}

// Allow takes a request of name from its bucket; when it is empty it
// answers how long until one would be taken.
func (r *RateLimits) Allow(name string) (bool, time.Duration) {
	if r == nil || r.perSecond <= 0 {
		return true, 0
	}
	now := time.Now()
	r.mu.Lock()
	if r.buckets == nil {
		r.buckets = map[string]*bucket{}
	}
	if now.Sub(r.swept) > time.Minute {
		for k, b := range r.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	b, ok := r.buckets[name]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(r.perSecond), max(r.burst, 1))}
		r.buckets[name] = b
	}
	b.seen = now
	r.mu.Unlock()
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// writeTooMany answers 429 with Retry-After: whole seconds, at least one.
func writeTooMany(w http.ResponseWriter, name string, wait time.Duration) {
	WriteTooMany(w, fmt.Sprintf("%q sends more requests than API_RATE_LIMIT allows: retry after the Retry-After seconds", name), wait)
}

// WriteTooMany refuses a request over its rate: 429, Retry-After in whole
// seconds (at least one), msg saying which limit, and the connection
// closed.
func WriteTooMany(w http.ResponseWriter, msg string, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Max(1, math.Ceil(wait.Seconds())))))
	writeAuthError(w, http.StatusTooManyRequests, msg)
}

// ClientHost is the address a request came from (its host, no port).
func ClientHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
