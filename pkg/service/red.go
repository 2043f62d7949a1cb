package service

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/telemetry"
)

// httpMetrics are an API's rate, errors and duration per route (RED): the
// route is the pattern of the ServeMux that served the request ("GET
// /v1/batches/{id}"), never the path, so that ids do not make a series
// each; a request refused before routing (authentication, a host not
// allowed) or matching no pattern is route "unmatched".
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archivist_http_requests_total",
			Help: "API requests answered, by route (the ServeMux pattern), method and status code."}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "archivist_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route and method.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "archivist_http_requests_in_flight",
			Help: "API requests being answered."}),
	}
	m.requests = telemetry.Register(reg, m.requests)
	m.duration = telemetry.Register(reg, m.duration)
	m.inFlight = telemetry.Register(reg, m.inFlight)
	return m
}

// routeOf is the pattern of h's ServeMux that r matches, "" when h is not
// a ServeMux (or the routes of one) or r matches none.
func routeOf(h http.Handler, r *http.Request) string {
	mux, ok := httpauth.Mux(h)
	if !ok {
		return ""
	}
	_, pattern := mux.Handler(r)
	return pattern
}

// measure measures every request to h, refused before routing or not:
// the route is read from routes (the service's ServeMux) before the
// request goes on.
func (m *httpMetrics) measure(h, routes http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		route := routeOf(routes, r)
		if route == "" {
			route = "unmatched"
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		method := methodLabel(r.Method)
		m.requests.WithLabelValues(route, method, strconv.Itoa(rec.status)).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// methodLabel is the method label of a request: one of the methods HTTP
// defines, or "OTHER". Go accepts any token as a method, and a client
// that has not authenticated chooses it, so a label taken from it as sent
// would let anyone grow every API's metrics without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// statusRecorder keeps the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(b)
}

// Flush passes a flush on (streamed answers).
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
