package work

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
)

// Endpoint is a service that serves work: its name, its API's base URL and
// the pipelines it holds.
type Endpoint struct {
	Service   string
	Base      string
	Pipelines []string
}

// The services that serve work and their pipelines.
var (
	// Curator holds ingest (batches, jobs) and the collections' mails.
	Curator = Endpoint{Service: "curator", Pipelines: []string{"ingest", "mail"}}
	// PWA holds research (episodes).
	PWA = Endpoint{Service: "pwa", Pipelines: []string{"research"}}
	// Indexer holds indexing (archive files).
	Indexer = Endpoint{Service: "indexer", Pipelines: []string{"index"}}
	// Auditor holds auditing (requests, repairs).
	Auditor = Endpoint{Service: "auditor", Pipelines: []string{"audit"}}
)

// Endpoints are the four services that hold work at their API's base
// URLs.
func Endpoints(curator, pwa, auditor, indexer string) []Endpoint {
	at := func(e Endpoint, base string) Endpoint { e.Base = base; return e }
	return []Endpoint{at(Curator, curator), at(PWA, pwa), at(Auditor, auditor), at(Indexer, indexer)}
}

// At is a client of the one service e at base.
func At(e Endpoint, base string) *Client {
	e.Base = base
	return &Client{Endpoints: []Endpoint{e}}
}

// Client asks every service that holds work, as one: the CLI's and the
// dashboard's way to find and act across the pipelines.
type Client struct {
	Endpoints []Endpoint
	// HTTP and Token, when set, are the client and the key presented
	// (else http.DefaultClient and apiclient.Token()).
	HTTP  *http.Client
	Token string
}

// Pipelines are every pipeline the client reaches.
func (c *Client) Pipelines() []string {
	var out []string
	for _, e := range c.Endpoints {
		out = append(out, e.Pipelines...)
	}
	return out
}

func (c *Client) do(ctx context.Context, e Endpoint, method, path string, q url.Values, out any) error {
	hc, token := c.HTTP, c.Token
	if hc == nil {
		hc = http.DefaultClient
	}
	if token == "" {
		token = apiclient.Token()
	}
	u := strings.TrimRight(e.Base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return apiclient.DoAs(ctx, hc, token, e.Service, method, u, nil, out)
}

// asked are the endpoints f's pipeline names (every one when it names
// none).
func (c *Client) asked(f Filter) ([]Endpoint, error) {
	var out []Endpoint
	for _, e := range c.Endpoints {
		if f.Pipeline == "" || slices.Contains(e.Pipelines, f.Pipeline) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, &InvalidError{Field: "pipeline", Msg: fmt.Sprintf("%q is none of %s", f.Pipeline, strings.Join(c.Pipelines(), ", "))}
	}
	return out, nil
}

// Find lists a page of the items f matches across the services, in one
// order: the latest moved first.
func (c *Client) Find(ctx context.Context, f Filter, after string, limit int) (Page, error) {
	limit, err := limitOf(limit)
	if err != nil {
		return Page{}, err
	}
	eps, err := c.asked(f)
	if err != nil {
		return Page{}, err
	}
	q := f.Values()
	q.Set("limit", strconv.Itoa(limit))
	if after != "" {
		q.Set("after", after)
	}
	var items []Item
	more := false
	for _, e := range eps {
		var p Page
		if err := c.do(ctx, e, http.MethodGet, "/v1/work", q, &p); err != nil {
			return Page{}, err
		}
		items = append(items, p.Items...)
		more = more || p.Next != ""
	}
	return pageOf(items, limit, more), nil
}

// ServiceCount is a service's part of a dry run.
type ServiceCount struct {
	Endpoint Endpoint
	Count    Count
}

// DryRun counts what v would move across the services; services whose
// work does not take v count nothing (unless none takes it).
func (c *Client) DryRun(ctx context.Context, v Verb, f Filter) (Count, []ServiceCount, error) {
	eps, err := c.asked(f)
	if err != nil {
		return Count{}, nil, err
	}
	total := Count{Verb: v, Filter: f, ByKind: map[string]int{}, Sample: []string{}}
	var parts []ServiceCount
	var refusals []string
	q := f.Values()
	q.Set("dry_run", "true")
	for _, e := range eps {
		var n Count
		err := c.do(ctx, e, http.MethodPost, "/v1/work/"+string(v), q, &n)
		var se *apiclient.StatusError
		if errors.As(err, &se) && se.Code == http.StatusUnprocessableEntity {
			refusals = append(refusals, se.Message)
			continue
		}
		if err != nil {
			return Count{}, nil, err
		}
		parts = append(parts, ServiceCount{Endpoint: e, Count: n})
		total.N += n.N
		for k, m := range n.ByKind {
			total.ByKind[k] += m
		}
		for _, s := range n.Sample {
			if len(total.Sample) < 20 {
				total.Sample = append(total.Sample, s)
			}
		}
	}
	if len(parts) == 0 {
		return Count{}, nil, &NoVerbError{Verb: v, Takes: refusals}
	}
	return total, parts, nil
}

// Act moves by v what f matches across the services, if the total is still
// the confirmed count: each service acts on its own part, confirmed by its
// own count, and logs it.
func (c *Client) Act(ctx context.Context, v Verb, f Filter, confirm int) ([]Action, error) {
	total, parts, err := c.DryRun(ctx, v, f)
	if err != nil {
		return nil, err
	}
	if total.N != confirm {
		return nil, &MovedError{Confirmed: confirm, Now: total.N}
	}
	return c.act(ctx, v, f, parts)
}

// ActNow counts what v moves of what f matches and moves it at once, each
// service confirmed by its own count (for a caller that has looked).
func (c *Client) ActNow(ctx context.Context, v Verb, f Filter) ([]Action, error) {
	_, parts, err := c.DryRun(ctx, v, f)
	if err != nil {
		return nil, err
	}
	return c.act(ctx, v, f, parts)
}

// act moves, on each service, its part of a dry run.
func (c *Client) act(ctx context.Context, v Verb, f Filter, parts []ServiceCount) ([]Action, error) {
	var out []Action
	for _, p := range parts {
		if p.Count.N == 0 {
			continue
		}
		q := f.Values()
		q.Set("confirm", strconv.Itoa(p.Count.N))
		var a Action
		if err := c.do(ctx, p.Endpoint, http.MethodPost, "/v1/work/"+string(v), q, &a); err != nil {
			return out, err
		}
		a.Service = p.Endpoint.Service
		out = append(out, a)
	}
	return out, nil
}

// NotMovedError is an action on one item that the verb does not move: the
// item is unknown, or not in a state the verb moves from.
type NotMovedError struct {
	Verb Verb
	Ref  string
}

func (e *NotMovedError) Error() string {
	return fmt.Sprintf("%s: no %s here, or not in a state %s moves", e.Verb, e.Ref, e.Verb)
}

// ActOn moves one item (or what a narrow filter names) by v: its dry run's
// count, then the action confirmed by it. Nothing to move is a
// NotMovedError.
func (c *Client) ActOn(ctx context.Context, v Verb, f Filter) ([]Action, error) {
	n, parts, err := c.DryRun(ctx, v, f)
	var nv *NoVerbError
	if errors.As(err, &nv) || (err == nil && n.N == 0) {
		return nil, &NotMovedError{Verb: v, Ref: f.Pipeline + "/" + f.Kind + "/" + f.ID}
	}
	if err != nil {
		return nil, err
	}
	return c.act(ctx, v, f, parts)
}

// Rates reads every service's queues' flow over window (10m when 0).
func (c *Client) Rates(ctx context.Context, window time.Duration) ([]Rates, error) {
	q := url.Values{}
	if window > 0 {
		q.Set("window", window.String())
	}
	var out []Rates
	for _, e := range c.Endpoints {
		var rs []Rates
		if err := c.do(ctx, e, http.MethodGet, "/v1/work/rates", q, &rs); err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Actions reads the action logs of every service, newest first (up to
// limit of each).
func (c *Client) Actions(ctx context.Context, actor string, limit int) ([]Action, error) {
	q := url.Values{}
	if actor != "" {
		q.Set("actor", actor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []Action
	for _, e := range c.Endpoints {
		var as []Action
		if err := c.do(ctx, e, http.MethodGet, "/v1/work/actions", q, &as); err != nil {
			return nil, err
		}
		for i := range as {
			as[i].Service = e.Service
		}
		out = append(out, as...)
	}
	slices.SortStableFunc(out, func(a, b Action) int { return b.At.Compare(a.At) })
	return out, nil
}
