package aggregator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/surt"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// Fields are the names of the CDX11 fields, in order, as the pywb and
// OpenWayback CDX servers name them in fl= and in JSON output.
var Fields = []string{"urlkey", "timestamp", "url", "mime", "status", "digest", "redirect", "robotflags", "length", "offset", "filename"}

// Handler serves GET /cdx, pywb's CDX server API (url and its wildcards,
// matchType exact|prefix|host|domain, from, to, limit, sort
// reverse|closest with closest, fl and the field aliases, output
// cdx|cdxj|json|link, filter, collapse and collapseTime, page, pageSize,
// showNumPages and showPagedIndex over the ZipNum blocks, and the Internet
// Archive's resumeKey and showResumeKey),
// GET /v1/index/generations, GET /v1/index/cdx (the whole index as one
// plain CDX file, streamed), POST /v1/index/withdraw {"file", "reason"}
// (an operator's: a tombstone, whether or not the file is indexed yet),
// POST /v1/index/reinstate {"file"}, the path index and the exclusions.
func (a *Aggregator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cdx", func(w http.ResponseWriter, r *http.Request) { a.query(w, r, nil) })
	mux.HandleFunc("GET /{point}/cdx", a.pointCDX)
	mux.HandleFunc("GET /v1/index/generations", func(w http.ResponseWriter, r *http.Request) {
		gens, err := a.Generations(r.Context())
		if err != nil {
			http.Error(w, "reading the generations failed", http.StatusInternalServerError)
			return
		}
		reply.JSON(w, http.StatusOK, gens)
	})
	a.exclusionRoutes(mux)
	a.pathRoutes(mux)
	mux.HandleFunc("GET /v1/index/cdx", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if n, err := a.Export(r.Context(), w); err != nil {
			// The status is sent: an export cut short must not look whole.
			a.log.Error("index export cut short", "lines", n, "err", err)
			panic(http.ErrAbortHandler)
		}
	})
	mux.HandleFunc("POST /v1/index/withdraw", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			File   string `json:"file"`
			Reason string `json:"reason"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.File == "" || req.Reason == "" {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": `send {"file": KEY, "reason": TEXT}: the archive file as the indexer names it, and why it leaves the index`})
			return
		}
		indexed, err := a.Withdraw(r.Context(), req.File, req.Reason)
		if err != nil {
			a.log.Error("withdraw", "file", req.File, "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "withdrawing failed"})
			return
		}
		reply.JSON(w, http.StatusOK, map[string]any{"withdrawn": req.File, "indexed": indexed})
	})
	mux.HandleFunc("POST /v1/index/reinstate", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			File string `json:"file"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.File == "" {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": `send {"file": KEY}: the archive file whose withdrawal was made in error`})
			return
		}
		had, err := a.Reinstate(r.Context(), req.File)
		if err != nil {
			a.log.Error("reinstate", "file", req.File, "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "reinstating failed"})
			return
		}
		if !had {
			reply.JSON(w, http.StatusNotFound, map[string]string{"error": "that file is not withdrawn from the index", "file": req.File})
			return
		}
		reply.JSON(w, http.StatusOK, map[string]string{"reinstated": req.File, "next": "index it again: archivist index reset FILE"})
	})
	// The exclusions (takedown URLs, their reasons, who added them) are for
	// the operators who keep them, not every reader of the index.
	return httpauth.RoutesOf(mux).Operator("GET /v1/index/exclusions").Open("GET /{point}/cdx")
}

// request is a parsed /cdx query.
type request struct {
	url string
	// original is the URL asked for, without a wildcard, with a scheme:
	// the original resource of a TimeMap.
	original string
	q        cdxindex.Query
	match    func(key string) bool
	filters  []filter
	// domain is the host of matchType=domain: the query seeks to its
	// two ranges (host")" and host","), not the bare prefix.
	domain string
	// collapse keeps the first of each run of lines whose field collapse
	// (its first collapseLen bytes; 0: all of it) is the same, and the
	// same status too when collapseStatus is set (pywb's collapseTime).
	collapse       int
	collapseLen    int
	collapseStatus bool
	// page is the page asked for (-1: the whole answer), pageSize its
	// blocks; numPages asks how many pages there are.
	page     int
	pageSize int
	numPages bool
	// pagedIndex asks for the summary lines of a page's blocks instead of
	// its lines (showPagedIndex).
	pagedIndex bool
	limit      int
	sort       string // "", "reverse" or "closest"
	closest    time.Time
	fields     []int    // indexes into Fields
	names      []string // the fields as fl names them (an alias kept)
	output     string   // "cdx", "cdxj", "json" or "link"
	// after resumes an answer in index order after this line (resumeKey);
	// showResume asks for the key that resumes this one, when it is cut
	// (showResumeKey).
	after      string
	showResume bool
}

// badRequest is a query the API refuses, with what is wrong.
type badRequest string

func (b badRequest) Error() string { return string(b) }

func parseRequest(p map[string][]string) (*request, error) {
	get := func(keys ...string) string {
		for _, k := range keys {
			if v := p[k]; len(v) > 0 && v[0] != "" {
				return v[0]
			}
		}
		return ""
	}
	r := &request{url: get("url")}
	if r.url == "" {
		return nil, badRequest("url is required")
	}
	url := r.url
	matchType := get("matchType")
	if matchType == "" {
		// pywb's wildcards (its CDXQuery and query_index, when no
		// matchType is given): *.example.com is the domain,
		// example.com/* a prefix.
		switch {
		case strings.HasPrefix(url, "*."):
			url, matchType = url[2:], "domain"
		case strings.HasSuffix(url, "*"):
			url, matchType = url[:len(url)-1], "prefix"
		}
	}
	if !strings.Contains(url, "://") && !strings.HasPrefix(url, "urn:") && !strings.HasPrefix(url, "dns:") {
		url = "http://" + url // as the CDX servers read a URL without a scheme
	}
	r.original = url
	key := surt.Key(url)
	r.q = cdxindex.Query{Key: key, From: get("from", "from_ts"), To: get("to")}
	host, _, _ := strings.Cut(key, ")")
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
		r.q.Prefix, r.q.Key, r.domain = true, host, host
		r.match = func(k string) bool { return strings.HasPrefix(k, host+")") || strings.HasPrefix(k, host+",") }
	default:
		return nil, badRequest("matchType: exact, prefix, host or domain")
	}
	for _, t := range []string{"from", "from_ts", "to", "closest"} {
		if v := get(t); v != "" && (len(v) > 14 || strings.Trim(v, "0123456789") != "") {
			return nil, badRequest(t + ": a timestamp of up to 14 digits (YYYYMMDDhhmmss or a prefix of it)")
		}
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return nil, badRequest("limit: a whole number of lines (the last N are sort=reverse&limit=N)")
		}
		r.limit = n
	}
	r.sort = get("sort")
	if r.sort != "" && r.sort != "reverse" && r.sort != "closest" {
		return nil, badRequest("sort: reverse or closest")
	}
	// pywb's forms (cdxops.process_cdx): a closest time sorts by it,
	// whatever sort says (its replay sends closest alone); reverse=true is
	// sort=reverse.
	rev, err := boolParam(p, "reverse")
	if err != nil {
		return nil, err
	}
	switch {
	case get("closest") != "":
		r.sort = "closest"
	case r.sort == "" && rev:
		r.sort = "reverse"
	}
	switch r.sort {
	case "", "reverse":
	case "closest":
		if get("closest") == "" {
			// closest= empty (pywb's calendar query): the index order.
			r.sort = ""
			break
		}
		r.closest = timestampTime(get("closest"))
	default:
		return nil, badRequest("sort: reverse or closest")
	}
	if fl := get("fl", "fields"); fl != "" {
		for _, f := range strings.Split(fl, ",") {
			f = strings.TrimSpace(f)
			i := fieldIndex(f)
			if i < 0 {
				return nil, badRequest("fl: unknown field " + strconv.Quote(f) + "; fields are " + strings.Join(Fields, ",") + ", or an alias of one")
			}
			r.fields, r.names = append(r.fields, i), append(r.names, f)
		}
	}
	if len(p["filter"]) > MaxFilters {
		return nil, badRequest(fmt.Sprintf("filter: at most %d filters a query, not %d", MaxFilters, len(p["filter"])))
	}
	for _, f := range p["filter"] {
		flt, err := parseFilter(f)
		if err != nil {
			return nil, err
		}
		r.filters = append(r.filters, flt)
	}
	r.collapse = -1
	if c := get("collapse"); c != "" {
		name, n, hasLen := strings.Cut(c, ":")
		if r.collapse = fieldIndex(name); r.collapse < 0 {
			return nil, badRequest("collapse: FIELD or FIELD:N, a field of " + strings.Join(Fields, ","))
		}
		if hasLen {
			if r.collapseLen, _ = strconv.Atoi(n); r.collapseLen <= 0 {
				return nil, badRequest("collapse: FIELD:N, N a number of leading characters")
			}
		}
	}
	if c := get("collapseTime"); c != "" {
		// pywb's collapseTime=N (cdx_collapse_time_status): the first
		// capture of each run with the same timestamp prefix of N digits
		// and the same status.
		n, err := strconv.Atoi(c)
		if err != nil || n <= 0 || n > 14 {
			return nil, badRequest("collapseTime: a number of timestamp digits, 1 to 14")
		}
		if r.collapse >= 0 {
			return nil, badRequest("collapse and collapseTime: one of them")
		}
		r.collapse, r.collapseLen, r.collapseStatus = 1, n, true
	}
	r.page = -1
	if pg := get("page"); pg != "" {
		n, err := strconv.Atoi(pg)
		if err != nil || n < 0 {
			return nil, badRequest("page: a page number from 0")
		}
		r.page = n
	}
	if ps := get("pageSize"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n <= 0 || n > MaxPageBlocks {
			return nil, badRequest(fmt.Sprintf("pageSize: blocks per page, 1 to %d", MaxPageBlocks))
		}
		r.pageSize = n
	}
	if r.numPages, err = boolParam(p, "showNumPages"); err != nil {
		return nil, err
	}
	if r.pagedIndex, err = boolParam(p, "showPagedIndex"); err != nil {
		return nil, err
	}
	if r.pagedIndex && r.page < 0 {
		r.page = 0 // pywb's default page
	}
	if r.showResume, err = boolParam(p, "showResumeKey"); err != nil {
		return nil, err
	}
	if k := get("resumeKey"); k != "" {
		if r.after, err = parseResumeKey(k); err != nil {
			return nil, err
		}
	}
	if (r.showResume || r.after != "") && (r.sort != "" || r.page >= 0 || r.numPages) {
		return nil, badRequest("resumeKey and showResumeKey resume an answer in index order: no sort, no page")
	}
	switch r.output = get("output"); r.output {
	case "", "cdx", "text":
		r.output = "cdx"
	case "cdxj", "json", "link":
	default:
		return nil, badRequest("output: cdx (or text), cdxj, json or link")
	}
	return r, nil
}

// boolParam reads a true-or-false parameter as pywb's to_bool does (true,
// t, 1, yes or on; false, f, 0, no, off or absent); anything else is
// refused, where pywb would take it as true.
func boolParam(p map[string][]string, name string) (bool, error) {
	v := ""
	if vs := p[name]; len(vs) > 0 {
		v = strings.ToLower(vs[0])
	}
	switch v {
	case "", "false", "f", "0", "no", "off":
		return false, nil
	case "true", "t", "1", "yes", "on":
		return true, nil
	}
	return false, badRequest(name + ": true or false")
}

// The bounds of a query's filters, checked before any is compiled or run:
// RE2 never backtracks, but a regular expression's cost (to compile, and
// for every line) grows with its program, and a 12 KB one took seconds
// and a gigabyte to compile.
const (
	// MaxFilters is the most filter parameters one query takes.
	MaxFilters = 8
	// MaxFilterBytes is the longest filter.
	MaxFilterBytes = 256
	// MaxFilterProgram is the largest program a filter's regular
	// expression may make (regexp/syntax instructions, repetitions
	// counted as written out).
	MaxFilterProgram = 2000
)

// MaxPageBlocks is the most blocks one page of an answer spans (a block
// holds AGGREGATOR_BLOCK_LINES lines in each cluster).
const MaxPageBlocks = 50

// DefaultPageBlocks is a page's blocks when the query names no pageSize
// (pywb's default).
const DefaultPageBlocks = 10

// aliases are the other names pywb (CDXObject.CDX_ALT_FIELDS) and the
// Wayback CDX servers give fields, the one-letter ones too. (pywb's table
// names "s" twice, status then length, and keeps the second; "s" is the
// status here, as its first entry means: docs/indexing.md.)
var aliases = map[string]string{
	"original": "url", "u": "url", "mimetype": "mime", "m": "mime", "statuscode": "status", "s": "status",
	"robotflag": "robotflags", "l": "length", "o": "offset", "d": "digest", "t": "timestamp", "k": "urlkey", "f": "filename",
}

// fieldIndex is a field's place in a CDX11 line, by name or alias; -1 for
// none.
func fieldIndex(name string) int {
	if a, ok := aliases[name]; ok {
		name = a
	}
	return slices.Index(Fields, name)
}

// filter is pywb's filter=[!][=|~][FIELD:]TEXT: by default the field
// contains TEXT; = it equals TEXT; ~ it matches the regular expression
// from its start; ! inverts; with no field, the whole line.
type filter struct {
	invert bool
	field  int // -1: the line
	match  func(string) bool
}

func parseFilter(s string) (filter, error) {
	f := filter{field: -1}
	if len(s) > MaxFilterBytes {
		return f, badRequest(fmt.Sprintf("filter: at most %d bytes, not %d", MaxFilterBytes, len(s)))
	}
	if f.invert = strings.HasPrefix(s, "!"); f.invert {
		s = s[1:]
	}
	mode := byte(0)
	if s != "" && (s[0] == '=' || s[0] == '~') {
		mode, s = s[0], s[1:]
	}
	if name, text, ok := strings.Cut(s, ":"); ok {
		if f.field = fieldIndex(name); f.field < 0 {
			return f, badRequest("filter: unknown field " + strconv.Quote(name) + "; fields are " + strings.Join(Fields, ","))
		}
		s = text
	}
	switch mode {
	case '=':
		f.match = func(v string) bool { return v == s }
	case '~':
		parsed, err := syntax.Parse(`^(?:`+s+`)`, syntax.Perl)
		if err != nil {
			return f, badRequest("filter: " + strconv.Quote(s) + " is not a regular expression: " + err.Error())
		}
		if n := programSize(parsed); n > MaxFilterProgram {
			return f, badRequest(fmt.Sprintf("filter: the regular expression %s is too large: about %d instructions written out, at most %d", strconv.Quote(s), n, MaxFilterProgram))
		}
		re, err := regexp.Compile(`^(?:` + s + `)`)
		if err != nil {
			return f, badRequest("filter: " + strconv.Quote(s) + " is not a regular expression: " + err.Error())
		}
		f.match = re.MatchString
	default:
		f.match = func(v string) bool { return strings.Contains(v, s) }
	}
	return f, nil
}

// programSize estimates the instructions re compiles to, repetitions
// written out (x{2,5} is five x's), without compiling or simplifying it
// (either would cost what the bound is for); it stops counting past
// MaxFilterProgram.
func programSize(re *syntax.Regexp) int {
	const over = MaxFilterProgram + 1
	size := 1
	switch re.Op {
	case syntax.OpLiteral:
		size = len(re.Rune)
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min + 1
		}
		return min(over, max(n, 1)*programSize(re.Sub[0])+1)
	}
	for _, sub := range re.Sub {
		if size += programSize(sub); size > over {
			return over
		}
	}
	return size
}

// field is field i of a CDX line ("" past its end).
func field(line string, i int) string {
	for range i {
		_, rest, ok := strings.Cut(line, " ")
		if !ok {
			return ""
		}
		line = rest
	}
	v, _, _ := strings.Cut(line, " ")
	return v
}

// keep is the request's filters, domain match and collapse over lines in
// index order (stateful: one per query).
func (r *request) keep() func(line string) bool {
	var last string
	seen := false
	return func(line string) bool {
		if !r.selects(line) {
			return false
		}
		if r.collapse >= 0 {
			v := r.collapseValue(line)
			if seen && v == last {
				return false
			}
			last, seen = v, true
		}
		return true
	}
}

// selects is the request's domain match and filters (stateless: any
// order of lines).
func (r *request) selects(line string) bool {
	if r.match != nil {
		if k, _, _ := strings.Cut(line, " "); !r.match(k) {
			return false
		}
	}
	for _, f := range r.filters {
		v := line
		if f.field >= 0 {
			v = field(line, f.field)
		}
		if f.match(v) == f.invert {
			return false
		}
	}
	return true
}

// collapseValue is what a line's collapse compares: its field (or the
// field's first collapseLen bytes), and its status with collapseTime.
func (r *request) collapseValue(line string) string {
	v := field(line, r.collapse)
	if r.collapseLen > 0 && len(v) > r.collapseLen {
		v = v[:r.collapseLen]
	}
	if r.collapseStatus {
		v += " " + field(line, 4)
	}
	return v
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
		slices.SortStableFunc(lines, func(a, b string) int { return cmp.Compare(r.distance(a), r.distance(b)) })
	}
	if r.limit > 0 && len(lines) > r.limit {
		lines = lines[:r.limit]
	}
	return lines
}

// query answers a /cdx query for access point p (nil: staff's view).
func (a *Aggregator) query(w http.ResponseWriter, hr *http.Request, p *point) {
	r, err := parseRequest(hr.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if p != nil {
		if r.pagedIndex {
			http.Error(w, "showPagedIndex is staff's (/cdx with a key): the summary names the URLs this access point hides", http.StatusForbidden)
			return
		}
		r.q.To = p.embargoTo(r.q.To, time.Now())
	}
	// No query reads more than the cap of lines, kept or not. Index order
	// stops at the limit (one line past it, to know whether the answer
	// goes on); a sorted query reads at most the cap, then orders and
	// cuts.
	limit := a.cfg.MaxQueryLines
	if limit <= 0 {
		limit = 10000
	}
	ctx, cancel := context.WithTimeout(hr.Context(), cmp.Or(a.cfg.QueryTimeout, 10*time.Second))
	defer cancel()
	ctx, view := withView(ctx, p)
	hr = hr.WithContext(ctx)
	if r.numPages || r.page >= 0 {
		a.paged(w, hr, r)
		return
	}
	read := &budget{Left: limit}
	keep := r.keep()
	ans := answer{}
	switch {
	case r.sort == "reverse" && r.collapse >= 0:
		// The newest runs, as pywb collapses them in index order: read
		// backward up to the cap, keep the oldest line of each run.
		want := limit
		if r.limit > 0 && r.limit < want {
			want = r.limit
		}
		ans.lines, err = a.reverseCollapsed(ctx, r, want, read)
	case r.collapse < 0 && (r.sort == "reverse" || r.sort == "closest" && !r.q.Prefix):
		// Read outward from where the answer begins (ordered.go); a
		// collapse keeps the first of each run in index order, and
		// closest over a prefix sorts every URL's captures, so those
		// read in index order below.
		want := limit
		if r.limit > 0 && r.limit < want {
			want = r.limit
		}
		if r.sort == "closest" {
			ans.lines, err = a.closest(ctx, r, want, read, keep)
		} else {
			ans.lines, err = a.reverse(ctx, r, want, read, keep)
		}
	default:
		stop := limit + 1 // the cap's next line is refused: the answer is marked cut
		if r.sort == "" && r.limit > 0 && r.limit < limit {
			stop = r.limit + 1
		}
		lo := ""
		if r.after != "" {
			lo = r.after + "\x00" // the first line after it
		}
		var clusters []live
		if clusters, err = a.liveClusters(ctx); err != nil {
			break // answered below
		}
		for _, rq := range r.ranges() { // listed once, a domain's two ranges read
			var got []string
			got, err = a.readRange(ctx, clusters, rq, lo, "", stop-len(ans.lines), read, keep)
			if ans.lines = append(ans.lines, got...); err != nil || len(ans.lines) >= stop || read.Spent {
				break
			}
		}
		if r.sort == "" {
			switch {
			case r.limit > 0 && len(ans.lines) > r.limit:
				ans.lines = ans.lines[:r.limit]
				ans.resume = ans.lines[r.limit-1]
			case read.Spent:
				ans.resume = read.Last
			}
		}
		ans.lines = r.order(ans.lines)
	}
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	if read.Spent {
		ans.cap = limit
	}
	ans.unread = view.names()
	r.write(w, hr, ans)
}

// ranges are the key ranges of the query's answer, in index order: one,
// or a domain's two, the host's own keys and its subdomains' (a seek to
// each, not a scan of every key the bare prefix begins: "c" is most of
// the index).
func (r *request) ranges() []cdxindex.Query {
	if r.domain == "" {
		return []cdxindex.Query{r.q}
	}
	own, subs := r.q, r.q
	own.Key, subs.Key = r.domain+")", r.domain+","
	return []cdxindex.Query{own, subs}
}

// queryFailed answers a query that failed: past its deadline, a 400
// naming the bound; otherwise a 500 (the cause logged).
func (a *Aggregator) queryFailed(w http.ResponseWriter, r *request, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		http.Error(w, fmt.Sprintf("the query ran past its deadline of %s (AGGREGATOR_QUERY_TIMEOUT): narrow it (url, matchType, filter)", cmp.Or(a.cfg.QueryTimeout, 10*time.Second)), http.StatusBadRequest)
		return
	}
	a.log.Error("cdx query", "url", r.url, "err", err)
	http.Error(w, "the query failed", http.StatusInternalServerError)
}

// paged answers showNumPages (how many pages of pageSize blocks the query
// spans, as pywb's ZipNum source counts them), page=N (that page's lines,
// filters applied, in index order or sorted as asked; the cap does not
// cut a page) and showPagedIndex (the summary lines of page N's blocks).
func (a *Aggregator) paged(w http.ResponseWriter, hr *http.Request, r *request) {
	view := viewOf(hr.Context())
	size := r.pageSize
	if size == 0 {
		size = DefaultPageBlocks
	}
	pages, err := a.Pages(hr.Context(), r.q, size)
	if err != nil {
		a.log.Error("cdx pages", "url", r.url, "err", err)
		http.Error(w, "the query failed", http.StatusInternalServerError)
		return
	}
	if r.numPages {
		n := map[string]any{"pages": pages.Count, "pageSize": size, "blocks": pages.Blocks}
		if unread := view.names(); len(unread) > 0 {
			n["incomplete"] = unreadMessage(unread)
			w.Header().Set("Archivist-Incomplete", unreadMessage(unread))
		}
		reply.JSON(w, http.StatusOK, n)
		return
	}
	if r.page >= pages.Count {
		if r.pagedIndex && pages.Count == 0 {
			r.writeBlocks(w, nil) // pywb: no blocks, an empty summary
			return
		}
		http.Error(w, fmt.Sprintf("page %d: the pages are 0 to %d", r.page, pages.Count-1), http.StatusBadRequest)
		return
	}
	if r.pagedIndex {
		r.writeBlocks(w, pages.PageBlocks(r.page))
		return
	}
	lines, err := a.Page(hr.Context(), r.q, pages, r.page, r.keep())
	if err != nil {
		a.queryFailed(w, r, err)
		return
	}
	// A page's lines sorted as asked, as pywb sorts each page it reads.
	r.write(w, hr, answer{lines: r.order(lines), unread: view.names()})
}
