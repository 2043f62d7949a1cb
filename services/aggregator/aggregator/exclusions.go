package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/surt"
)

// Exclusion takes captures out of every answer (a takedown), or out of
// one access point's: those whose URL key starts with SURT and, when From
// or To is set, whose timestamp is within them.
type Exclusion struct {
	ID int64 `json:"id"`
	// SURT is the URL key prefix excluded ("com,example)/private").
	SURT string `json:"surt"`
	// URL is the URL the operator named, when the prefix came from one.
	URL string `json:"url,omitempty"`
	// From and To bound the capture time (timestamp prefixes; "" open).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Reason is why (a takedown request, a legal hold).
	Reason string `json:"reason"`
	// AddedBy is the operator's key name; AddedAt when.
	AddedBy string    `json:"added_by"`
	AddedAt time.Time `json:"added_at"`
	// AccessPoint is the access point whose view it hides the captures
	// from; "" is every view, staff's too: a takedown.
	AccessPoint string `json:"access_point,omitempty"`
}

// excludes reports whether the exclusion takes a capture of key at ts.
func (e Exclusion) excludes(key, ts string) bool {
	if !strings.HasPrefix(key, e.SURT) {
		return false
	}
	if e.From != "" && ts < e.From {
		return false
	}
	return e.To == "" || ts <= e.To || strings.HasPrefix(ts, e.To)
}

// exclusions is a replica's copy of the exclusion list, reloaded when its
// version changes (every change bumps it in the same transaction).
type exclusions struct {
	mu      sync.Mutex
	version int64
	loaded  bool
	// byLen holds the exclusions by the length of their prefix, then by
	// the prefix: a line is looked up once per distinct length.
	byLen map[int]map[string][]Exclusion
	lens  []int
}

// current returns the list as of now: one small read per query, a reload
// when another replica (or this one) changed it.
func (a *Aggregator) currentExclusions(ctx context.Context) (*exclusions, error) {
	var v int64
	if err := a.db.QueryRow(ctx, `SELECT v FROM aggregator.exclusions_version`).Scan(&v); err != nil {
		return nil, fmt.Errorf("read the exclusions' version: %w", err)
	}
	x := &a.excl
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.loaded && x.version == v {
		return x, nil
	}
	list, err := a.Exclusions(ctx)
	if err != nil {
		return nil, err
	}
	x.set(list)
	x.version, x.loaded = v, true
	return x, nil
}

// queryExclusions is currentExclusions once a query: a query's view keeps
// the list it read first (a backward read's windows, a domain's two
// ranges, a page's clusters each asked for it).
func (a *Aggregator) queryExclusions(ctx context.Context) (*exclusions, error) {
	v := viewOf(ctx)
	if v == nil {
		return a.currentExclusions(ctx)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.excl == nil {
		x, err := a.currentExclusions(ctx)
		if err != nil {
			return nil, err
		}
		v.excl = x
	}
	return v.excl, nil
}

// set makes list the exclusions looked up.
func (x *exclusions) set(list []Exclusion) {
	x.byLen, x.lens = map[int]map[string][]Exclusion{}, nil
	for _, e := range list {
		n := len(e.SURT)
		if _, ok := x.byLen[n]; !ok {
			x.lens = append(x.lens, n)
			x.byLen[n] = map[string][]Exclusion{}
		}
		x.byLen[n][e.SURT] = append(x.byLen[n][e.SURT], e)
	}
	slices.Sort(x.lens)
}

// excluded reports whether a CDX line is excluded from the view of access
// point ("": staff's, where only the takedowns apply): one map look-up per
// distinct prefix length (its key's prefix of that length), not a test of
// every exclusion: a takedown list of a million URLs costs a line what a
// list of one does, times the lengths in it.
func (x *exclusions) excluded(line, point string) bool {
	if len(x.lens) == 0 {
		return false
	}
	key, rest, _ := strings.Cut(line, " ")
	ts, _, _ := strings.Cut(rest, " ")
	for _, n := range x.lens {
		if n > len(key) {
			break
		}
		for _, e := range x.byLen[n][key[:n]] {
			if (e.AccessPoint == "" || e.AccessPoint == point) && e.excludes(key, ts) {
				return true
			}
		}
	}
	return false
}

// Exclusions lists the exclusions, by prefix.
func (a *Aggregator) Exclusions(ctx context.Context) ([]Exclusion, error) {
	rows, err := a.db.Query(ctx, `SELECT id, surt, url, from_ts, to_ts, reason, added_by, added_at, access_point FROM aggregator.exclusions ORDER BY surt, id`)
	if err != nil {
		return nil, fmt.Errorf("list exclusions: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Exclusion])
}

// AddExclusion records an exclusion; every query of every replica applies
// it from the moment it returns.
func (a *Aggregator) AddExclusion(ctx context.Context, e Exclusion) (Exclusion, error) {
	err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO aggregator.exclusions (surt, url, from_ts, to_ts, reason, added_by, access_point)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, added_at`, e.SURT, e.URL, e.From, e.To, e.Reason, e.AddedBy, e.AccessPoint).Scan(&e.ID, &e.AddedAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE aggregator.exclusions_version SET v = v + 1`)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("add exclusion %s: %w", e.SURT, err)
	}
	a.log.InfoContext(ctx, "exclusion added", "exclusion", e.ID, "surt", e.SURT, "from", e.From, "to", e.To, "access_point", e.AccessPoint, "reason", e.Reason, "by", e.AddedBy)
	return e, nil
}

// errNoExclusion is returned for an exclusion id that names none.
var errNoExclusion = errors.New("no such exclusion")

// RemoveExclusion lifts an exclusion.
func (a *Aggregator) RemoveExclusion(ctx context.Context, id int64, by string) error {
	return pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		var s string
		if err := tx.QueryRow(ctx, `DELETE FROM aggregator.exclusions WHERE id = $1 RETURNING surt`, id).Scan(&s); errors.Is(err, pgx.ErrNoRows) {
			return errNoExclusion
		} else if err != nil {
			return fmt.Errorf("remove exclusion %d: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE aggregator.exclusions_version SET v = v + 1`); err != nil {
			return err
		}
		a.log.InfoContext(ctx, "exclusion lifted", "exclusion", id, "surt", s, "by", by)
		return nil
	})
}

// ACL writes the exclusions that apply to access point's view ("":
// staff's, the takedowns alone) as pywb access-control rules (.aclj): a line
// per exclusion, "SURT - JSON", access "exclude", a time range as pywb's
// "after" and "before" (14-digit timestamps), lines in reverse order as
// pywb reads them.
func ACL(list []Exclusion, point string) string {
	lines := make([]string, 0, len(list))
	for _, e := range list {
		if e.AccessPoint != "" && e.AccessPoint != point {
			continue
		}
		rule := map[string]string{"access": "exclude"}
		if e.URL != "" {
			rule["url"] = e.URL
		}
		if e.From != "" {
			rule["after"] = pad14(e.From, '0')
		}
		if e.To != "" {
			rule["before"] = pad14(e.To, '9')
		}
		b, _ := json.Marshal(rule)
		lines = append(lines, e.SURT+" - "+string(b))
	}
	slices.Sort(lines)
	slices.Reverse(lines)
	lines = slices.Compact(lines)
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// pad14 pads a timestamp prefix to 14 digits with c.
func pad14(ts string, c byte) string {
	for len(ts) < 14 {
		ts += string(c)
	}
	return ts
}

// exclusionRoutes serves GET /v1/index/exclusions (the list, or
// ?format=aclj[&access_point=NAME] for pywb), POST /v1/index/exclusions
// {"url" or "surt", "from", "to", "reason", "access_point"} and DELETE
// /v1/index/exclusions/{id}.
func (a *Aggregator) exclusionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/index/exclusions", func(w http.ResponseWriter, r *http.Request) {
		list, err := a.Exclusions(r.Context())
		if err != nil {
			a.log.Error("list exclusions", "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "listing the exclusions failed"})
			return
		}
		switch r.URL.Query().Get("format") {
		case "", "json":
			if list == nil {
				list = []Exclusion{}
			}
			reply.JSON(w, http.StatusOK, list)
		case "aclj":
			point := r.URL.Query().Get("access_point")
			if _, ok := a.points[point]; point != "" && !ok {
				reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "access_point: " + a.pointNames()})
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(ACL(list, point)))
		default:
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "format: json or aclj (pywb's access-control rules)"})
		}
	})
	mux.HandleFunc("POST /v1/index/exclusions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			URL    string `json:"url"`
			SURT   string `json:"surt"`
			From   string `json:"from"`
			To     string `json:"to"`
			Reason string `json:"reason"`
			Point  string `json:"access_point"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": `send {"url" or "surt", "from", "to", "reason", "access_point"}: ` + err.Error()})
			return
		}
		e := Exclusion{URL: req.URL, SURT: req.SURT, From: req.From, To: req.To, Reason: strings.TrimSpace(req.Reason), AccessPoint: req.Point}
		if msg := e.fill(); msg != "" {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": msg})
			return
		}
		if _, ok := a.points[e.AccessPoint]; e.AccessPoint != "" && !ok {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "access_point: " + a.pointNames() + ", or none for a takedown (every view)"})
			return
		}
		if id, ok := apiauth.Caller(r.Context()); ok {
			e.AddedBy = id.Name
		}
		e, err := a.AddExclusion(r.Context(), e)
		if err != nil {
			a.log.Error("add exclusion", "surt", e.SURT, "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "adding the exclusion failed"})
			return
		}
		reply.JSON(w, http.StatusCreated, e)
	})
	mux.HandleFunc("DELETE /v1/index/exclusions/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "an exclusion's id is a number"})
			return
		}
		by := ""
		if c, ok := apiauth.Caller(r.Context()); ok {
			by = c.Name
		}
		switch err := a.RemoveExclusion(r.Context(), id, by); {
		case errors.Is(err, errNoExclusion):
			reply.JSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			a.log.Error("remove exclusion", "exclusion", id, "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "lifting the exclusion failed"})
		default:
			reply.JSON(w, http.StatusOK, map[string]int64{"lifted": id})
		}
	})
}

// fill checks an exclusion from a request and derives its SURT prefix from
// its URL; it returns what is wrong, or "".
func (e *Exclusion) fill() string {
	switch {
	case e.Reason == "":
		return "reason: say why the captures are excluded"
	case (e.URL == "") == (e.SURT == ""):
		return "name either url (a URL: it and every URL whose key it prefixes) or surt (a URL key prefix, \"com,example\" for a domain and its hosts)"
	case len(e.URL) > 4096 || len(e.SURT) > 4096 || len(e.Reason) > 4096:
		return "url, surt and reason are at most 4096 bytes"
	}
	for name, ts := range map[string]string{"from": e.From, "to": e.To} {
		if len(ts) > 14 || strings.Trim(ts, "0123456789") != "" {
			return name + ": a timestamp of up to 14 digits (YYYYMMDDhhmmss or a prefix of it)"
		}
	}
	if e.From != "" && e.To != "" && e.From > e.To {
		return "from is after to"
	}
	if e.URL != "" {
		u := e.URL
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		e.SURT = surt.Key(u) // its key, a prefix of its pages' below it
	}
	return ""
}
