package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/work"
)

// workClient asks every service that holds work on the caller's behalf
// (its key passed on: each API scopes and refuses as it would the caller).
func (d *Dashboard) workClient(ctx context.Context) *work.Client {
	return &work.Client{HTTP: d.client, Token: apiauth.Credential(ctx),
		Endpoints: work.Endpoints(d.cfg.CuratorURL, d.cfg.PWAURL, d.cfg.AuditorURL, d.cfg.IndexerURL)}
}

// workView is the work page: the filter, a page of what it matches, and
// an action's dry run or outcome.
type workView struct {
	Filter  work.Filter
	Form    map[string]string
	Query   string
	Page    work.Page
	Err     string
	Verbs   []work.Verb
	Count   *work.Count
	Verb    work.Verb
	Acted   []work.Action
	Moved   int
	Actions []work.Action
	Rates   []work.Rates
}

// historyKind is the /item kind that tells an item's history, "" when none.
func historyKind(it work.Item) string {
	switch it.Kind {
	case "job", "batch", "episode", "file":
		return it.Kind
	case "request", "repair", "check":
		return "object"
	}
	return ""
}

// historyID is the id /item names the item by.
func historyID(it work.Item) string {
	if historyKind(it) == "object" && len(it.Keys) > 0 {
		return it.Keys[0] // a request's or repair's object; a check's id is its object
	}
	return it.ID
}

// filterOf reads the work page's filter from a form (or the query).
func filterOf(form url.Values) (work.Filter, map[string]string, error) {
	f, err := work.ParseFilter(form)
	fields := map[string]string{}
	for _, k := range []string{"pipeline", "kind", "state", "collection", "submitter", "older_than", "query"} {
		fields[k] = form.Get(k)
	}
	return f, fields, err
}

// workPage serves GET /work: the search.
func (d *Dashboard) workPage(w http.ResponseWriter, r *http.Request) {
	v := d.findWork(r, r.URL.Query())
	d.render(w, "work", v)
}

func (d *Dashboard) findWork(r *http.Request, form url.Values) *workView {
	v := &workView{Verbs: actVerbs}
	f, fields, err := filterOf(form)
	v.Filter, v.Form, v.Query = f, fields, f.Values().Encode()
	if err != nil {
		v.Err = err.Error()
		return v
	}
	limit, _ := strconv.Atoi(form.Get("limit"))
	if limit <= 0 || limit > work.MaxPage {
		limit = 50
	}
	cl := d.workClient(r.Context())
	p, err := cl.Find(r.Context(), f, form.Get("after"), limit)
	if err != nil {
		v.Err = err.Error()
	}
	v.Page = p
	// The queues' flow, for staff (a publisher's key is refused it: the
	// counts are every tenant's).
	if caller, _ := apiauth.Caller(r.Context()); caller.Has(apiauth.Reader) || caller.Has(apiauth.Operator) {
		v.Rates, _ = cl.Rates(r.Context(), 0)
	}
	return v
}

// actVerbs are the verbs the page offers: the services' (dead letters are
// the operator's CLI's, `archivist work replay`: the dashboard's NATS user
// only reads them).
var actVerbs = []work.Verb{work.Retry, work.Release, work.Hold, work.Skip, work.Park, work.Requeue, work.Delete, work.Resend}

// workAct serves POST /work/act: with step=count, a dry run of the verb
// on the filter, shown with a button that confirms its count; with
// step=act and confirm=N, the action, refused when N no longer moves.
func (d *Dashboard) workAct(w http.ResponseWriter, r *http.Request) {
	if why := httpauth.CrossSite(r); why != "" {
		http.Error(w, "actions come from this site's own pages: "+why, http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read", http.StatusBadRequest)
		return
	}
	v := d.findWork(r, r.PostForm)
	if v.Err != "" {
		w.WriteHeader(http.StatusBadRequest)
		d.render(w, "work", v)
		return
	}
	verb, err := work.ParseVerb(r.PostForm.Get("verb"))
	if err == nil && v.Query == "" {
		err = errors.New("an action needs a filter: name a pipeline, a state, a collection or a query first")
	}
	if err != nil {
		v.Err = err.Error()
		w.WriteHeader(http.StatusBadRequest)
		d.render(w, "work", v)
		return
	}
	v.Verb = verb
	cl := d.workClient(r.Context())
	switch r.PostForm.Get("step") {
	case "act":
		n, err := strconv.Atoi(r.PostForm.Get("confirm"))
		if err != nil || n < 0 {
			v.Err = "confirm is the dry run's count"
			break
		}
		v.Acted, err = cl.Act(r.Context(), verb, v.Filter, n)
		for _, a := range v.Acted {
			v.Moved += a.Moved
		}
		if err != nil {
			v.Err = err.Error()
		}
		// The page shows the work as the action left it.
		v.Page, _ = cl.Find(r.Context(), v.Filter, "", 50)
	default:
		c, _, err := cl.DryRun(r.Context(), verb, v.Filter)
		if err != nil {
			v.Err = err.Error()
		} else {
			v.Count = &c
		}
	}
	code := http.StatusOK
	var se *apiclient.StatusError
	if v.Err != "" && errors.As(err, &se) {
		code = se.Code
	}
	w.WriteHeader(code)
	d.render(w, "work", v)
}

// workActions serves GET /work/actions: the action log of every service.
func (d *Dashboard) workActions(w http.ResponseWriter, r *http.Request) {
	v := &workView{}
	as, err := d.workClient(r.Context()).Actions(r.Context(), r.URL.Query().Get("actor"), 100)
	if err != nil {
		v.Err = err.Error()
	}
	v.Actions = as
	d.render(w, "actions", v)
}

// MineBatch is a batch on the depositor's page, with its place in the
// queue.
type MineBatch struct {
	Listed
	Jobs  map[string]int `json:"jobs"`
	Queue *struct {
		JobsLeft      int        `json:"jobs_left"`
		JobsAhead     int        `json:"jobs_ahead"`
		JobsPerMinute float64    `json:"jobs_per_minute"`
		EstimatedEnd  *time.Time `json:"estimated_end"`
	} `json:"queue"`
}

// mine serves GET /mine: a depositor's own batches (a publisher's key
// lists only its own; staff see the newest of all), each open one with
// its jobs left, the jobs ahead of it in the queue, the queue's pace and
// the estimated end.
func (d *Dashboard) mine(w http.ResponseWriter, r *http.Request) {
	caller, _ := apiauth.Caller(r.Context())
	data := map[string]any{"Name": caller.Name}
	var list []Listed
	q := "/v1/batches?limit=20"
	if caller.OwnOnly() {
		q += "&submitter=" + url.QueryEscape(caller.Name)
	}
	if err := d.get(r.Context(), "curator", d.cfg.CuratorURL, q, &list); err != nil {
		data["Error"] = err.Error()
		d.render(w, "mine", data)
		return
	}
	batches := make([]MineBatch, 0, len(list))
	for _, b := range list {
		mb := MineBatch{Listed: b}
		if b.State != "completed" && b.State != "failed" && b.State != "deleted" {
			if err := d.get(r.Context(), "curator", d.cfg.CuratorURL, "/v1/batches/"+strconv.FormatInt(b.ID, 10), &mb); err != nil {
				data["Error"] = err.Error()
			}
			mb.Listed = b
		}
		batches = append(batches, mb)
	}
	data["Batches"] = batches
	d.render(w, "mine", data)
}
