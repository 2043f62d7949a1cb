package aggregator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/surt"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// Fields are the names of the CDX11 fields, in order, as the pywb and
// OpenWayback CDX servers name them in fl= and in JSON output.
var Fields = []string{"urlkey", "timestamp", "url", "mime", "status", "digest", "redirect", "robotflags", "length", "offset", "filename"}

// Handler serves GET /cdx (url, matchType exact|prefix|host|domain, from,
// to, limit, sort reverse|closest with closest, fl, output cdx|json),
// GET /v1/index/generations and POST /v1/index/withdraw {"file", "reason"}
// (an operator's).
func (a *Aggregator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cdx", a.cdx)
	mux.HandleFunc("GET /v1/index/generations", func(w http.ResponseWriter, r *http.Request) {
		gens, err := a.Generations(r.Context())
		if err != nil {
			http.Error(w, "reading the generations failed", http.StatusInternalServerError)
			return
		}
		reply(w, http.StatusOK, gens)
	})
	mux.HandleFunc("POST /v1/index/withdraw", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			File   string `json:"file"`
			Reason string `json:"reason"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.File == "" || req.Reason == "" {
			reply(w, http.StatusBadRequest, map[string]string{"error": `send {"file": KEY, "reason": TEXT}: the archive file as the indexer names it, and why it leaves the index`})
			return
		}
		err := a.Withdraw(r.Context(), req.File, req.Reason)
		if errors.Is(err, ErrUnknownFile) {
			reply(w, http.StatusNotFound, map[string]string{"error": err.Error(), "file": req.File})
			return
		}
		if err != nil {
			a.log.Error("withdraw", "file", req.File, "err", err)
			reply(w, http.StatusInternalServerError, map[string]string{"error": "withdrawing failed"})
			return
		}
		reply(w, http.StatusOK, map[string]string{"withdrawn": req.File})
	})
	return mux
}

// reply writes v as JSON with status code.
func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// request is a parsed /cdx query.
type request struct {
	url     string
	q       cdxindex.Query
	match   func(key string) bool
	limit   int
	sort    string // "", "reverse" or "closest"
	closest time.Time
	fields  []int // indexes into Fields
	json    bool
}

// badRequest is a query the API refuses, with what is wrong.
type badRequest string

func (b badRequest) Error() string { return string(b) }

func parseRequest(p map[string][]string) (*request, error) {
	get := func(k string) string {
		if v := p[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	r := &request{url: get("url")}
	if r.url == "" {
		return nil, badRequest("url is required")
	}
	url := r.url
	if !strings.Contains(url, "://") && !strings.HasPrefix(url, "urn:") && !strings.HasPrefix(url, "dns:") {
		url = "http://" + url // as the CDX servers read a URL without a scheme
	}
	key := surt.Key(url)
	r.q = cdxindex.Query{Key: key, From: get("from"), To: get("to")}
	host, _, _ := strings.Cut(key, ")")
	matchType := get("matchType")
	switch matchType {
	case "", "exact":
	case "prefix":
		r.q.Prefix = true
		r.q.Key = strings.TrimSuffix(key, "/")
		if strings.HasSuffix(r.q.Key, ")") {
			r.q.Key += "/"
		}
	case "host":
		r.q.Prefix, r.q.Key = true, host+")"
	case "domain":
		r.q.Prefix, r.q.Key = true, host
		r.match = func(k string) bool { return strings.HasPrefix(k, host+")") || strings.HasPrefix(k, host+",") }
	default:
		return nil, badRequest("matchType: exact, prefix, host or domain")
	}
	for _, t := range []string{"from", "to", "closest"} {
		if v := get(t); v != "" && (len(v) > 14 || strings.Trim(v, "0123456789") != "") {
			return nil, badRequest(t + ": a timestamp of up to 14 digits (YYYYMMDDhhmmss or a prefix of it)")
		}
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return nil, badRequest("limit: a whole number")
		}
		r.limit = n
	}
	switch r.sort = get("sort"); r.sort {
	case "", "reverse":
	case "closest":
		if matchType != "" && matchType != "exact" {
			return nil, badRequest("sort=closest needs matchType=exact")
		}
		if get("closest") == "" {
			return nil, badRequest("sort=closest needs closest=TIMESTAMP")
		}
		r.closest = timestampTime(get("closest"))
	default:
		return nil, badRequest("sort: reverse or closest")
	}
	if fl := get("fl"); fl != "" {
		for _, f := range strings.Split(fl, ",") {
			i := slices.Index(Fields, strings.TrimSpace(f))
			if i < 0 {
				return nil, badRequest("fl: unknown field " + strconv.Quote(f) + "; fields are " + strings.Join(Fields, ","))
			}
			r.fields = append(r.fields, i)
		}
	}
	switch get("output") {
	case "", "cdx", "text":
	case "json":
		r.json = true
	default:
		return nil, badRequest("output: cdx or json")
	}
	return r, nil
}

// timestampTime reads a 14-digit CDX timestamp or a prefix of one (the rest
// taken as the earliest moment: "2026" is 2026-01-01 00:00:00 UTC).
func timestampTime(ts string) time.Time {
	const floor = "19700101000000"
	if len(ts) < len(floor) {
		ts += floor[len(ts):]
	}
	t, err := time.Parse("20060102150405", ts[:14])
	if err != nil {
		// Out-of-range parts (month 13, day 00): compare as far as they go.
		y, _ := strconv.Atoi(ts[:4])
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

// order puts the lines (in index order) in the requested order and keeps
// at most the limit: reverse is newest-last-first over the index order;
// closest is by distance from the closest timestamp, earlier first on a tie.
func (r *request) order(lines []string) []string {
	switch r.sort {
	case "reverse":
		slices.Reverse(lines)
	case "closest":
		dist := func(l string) time.Duration {
			f := strings.Fields(l)
			if len(f) < 2 {
				return 1<<63 - 1
			}
			d := timestampTime(f[1]).Sub(r.closest)
			if d < 0 {
				d = -d
			}
			return d
		}
		slices.SortStableFunc(lines, func(a, b string) int {
			da, db := dist(a), dist(b)
			switch {
			case da < db:
				return -1
			case da > db:
				return 1
			}
			return 0
		})
	}
	if r.limit > 0 && len(lines) > r.limit {
		lines = lines[:r.limit]
	}
	return lines
}

func (a *Aggregator) cdx(w http.ResponseWriter, hr *http.Request) {
	r, err := parseRequest(hr.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The limit is applied while the generations are read: index order
	// stops at the limit; a sorted query reads at most the hard cap, then
	// orders and cuts. No query reads more than the cap.
	q := r.q
	limit := a.cfg.MaxQueryLines
	if limit <= 0 {
		limit = 10000
	}
	q.Limit = limit
	if r.sort == "" && r.limit > 0 && r.limit < limit {
		q.Limit = r.limit
	}
	lines, err := a.Lookup(hr.Context(), q, r.match)
	if err != nil {
		a.log.Error("cdx query", "url", r.url, "err", err)
		http.Error(w, "the query failed", http.StatusInternalServerError)
		return
	}
	lines = r.order(lines)
	fields := r.fields
	if fields == nil {
		for i := range Fields {
			fields = append(fields, i)
		}
	}
	if r.json {
		w.Header().Set("Content-Type", "text/x-ndjson")
		enc := json.NewEncoder(w)
		for _, l := range lines {
			f := strings.Fields(l)
			obj := map[string]string{}
			for _, i := range fields {
				if i < len(f) && f[i] != "-" {
					obj[Fields[i]] = f[i]
				}
			}
			enc.Encode(obj)
		}
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	if r.fields == nil {
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
		return
	}
	out := make([]string, 0, len(fields))
	for _, l := range lines {
		f := strings.Fields(l)
		out = out[:0]
		for _, i := range fields {
			if i < len(f) {
				out = append(out, f[i])
			} else {
				out = append(out, "-")
			}
		}
		fmt.Fprintln(w, strings.Join(out, " "))
	}
}
