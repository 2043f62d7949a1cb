package httpauth

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

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
