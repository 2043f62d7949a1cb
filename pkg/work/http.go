package work

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
)

// The routes Handler serves, for a service's Routes: find is staff's and a
// publisher's (its own), acting an operator's and a publisher's (its own),
// the action log staff's.
const (
	FindRoute    = "GET /v1/work"
	ActRoute     = "POST /v1/work/{verb}"
	ActionsRoute = "GET /v1/work/actions"
)

// Handle adds the work routes to mux:
//
//	GET  /v1/work?<filter>&after=&limit=         a page of items
//	POST /v1/work/{verb}?<filter>&dry_run=true   what the verb would move
//	POST /v1/work/{verb}?<filter>&confirm=N      the action, if N would move
//	GET  /v1/work/actions?actor=&before=&limit=  the action log
//	GET  /v1/work/rates?window=10m               each queue's flow (staff)
//
// A filter is pipeline, kind, id, state, collection, submitter, older_than
// and query (ParseFilter). A publisher finds and acts on its own work only
// (its filter's submitter is itself); mark the routes with MarkRoutes.
func (s *Store) Handle(mux *http.ServeMux, log *slog.Logger) {
	mux.HandleFunc(FindRoute, func(w http.ResponseWriter, r *http.Request) {
		f, err := callerFilter(r, false)
		if err != nil {
			writeErr(w, log, err)
			return
		}
		limit, err := intParam(r, "limit")
		if err != nil {
			writeErr(w, log, err)
			return
		}
		page, err := s.Find(r.Context(), f, r.URL.Query().Get("after"), limit)
		if err != nil {
			writeErr(w, log, err)
			return
		}
		reply.JSON(w, http.StatusOK, page)
	})
	mux.HandleFunc(ActRoute, func(w http.ResponseWriter, r *http.Request) {
		v, err := ParseVerb(r.PathValue("verb"))
		if err != nil {
			writeErr(w, log, err)
			return
		}
		f, err := callerFilter(r, true)
		if err != nil {
			writeErr(w, log, err)
			return
		}
		q := r.URL.Query()
		if q.Get("dry_run") == "true" {
			c, err := s.DryRun(r.Context(), v, f)
			if err != nil {
				writeErr(w, log, err)
				return
			}
			reply.JSON(w, http.StatusOK, c)
			return
		}
		if q.Get("confirm") == "" {
			writeErr(w, log, &InvalidError{Field: "confirm", Msg: "an action names the count its dry run (dry_run=true) showed"})
			return
		}
		n, err := intParam(r, "confirm")
		if err != nil {
			writeErr(w, log, err)
			return
		}
		caller, _ := apiauth.Caller(r.Context())
		a, err := s.Act(r.Context(), v, f, n, caller.Name)
		if err != nil {
			writeErr(w, log, err)
			return
		}
		log.InfoContext(r.Context(), "work action", "action", a.ID, "actor", a.Actor, "verb", a.Verb, "moved", a.Moved, "filter", f.Values().Encode())
		reply.JSON(w, http.StatusOK, a)
	})
	mux.HandleFunc(RatesRoute, func(w http.ResponseWriter, r *http.Request) {
		var window time.Duration
		if v := r.URL.Query().Get("window"); v != "" {
			d, err := ParseAge(v)
			if err != nil || d <= 0 || d > 7*24*time.Hour {
				writeErr(w, log, &InvalidError{Field: "window", Msg: "an age up to 7d (10m, 1h)"})
				return
			}
			window = d
		}
		rates, err := s.Rates(r.Context(), window)
		if err != nil {
			writeErr(w, log, err)
			return
		}
		reply.JSON(w, http.StatusOK, rates)
	})
	mux.HandleFunc(ActionsRoute, func(w http.ResponseWriter, r *http.Request) {
		limit, err := intParam(r, "limit")
		if err != nil {
			writeErr(w, log, err)
			return
		}
		before, err := intParam(r, "before")
		if err != nil {
			writeErr(w, log, err)
			return
		}
		actor := r.URL.Query().Get("actor")
		if caller, _ := apiauth.Caller(r.Context()); !caller.Has(apiauth.Reader) && !caller.Has(apiauth.Operator) {
			actor = caller.Name
		}
		out, err := s.Actions(r.Context(), actor, int64(before), limit)
		if err != nil {
			writeErr(w, log, err)
			return
		}
		reply.JSON(w, http.StatusOK, out)
	})
}

// MarkRoutes gives the work routes their roles in rt: staff and
// publishers find and read the log (a publisher its own), operators and
// publishers act (a publisher on its own).
func MarkRoutes(rt httpauth.Routes) httpauth.Routes {
	return rt.Publisher(FindRoute, ActionsRoute).Depositor(ActRoute)
}

// callerFilter reads the request's filter, scoped to the caller: a
// publisher that is not staff finds only its own work, and one that is no
// operator acts only on its own.
func callerFilter(r *http.Request, acting bool) (Filter, error) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		return f, err
	}
	caller, _ := apiauth.Caller(r.Context())
	if caller.OwnOnly() || (acting && !caller.Has(apiauth.Operator)) {
		f.Submitter = caller.Name
	}
	return f, nil
}

func intParam(r *http.Request, name string) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, &InvalidError{Field: name, Msg: strconv.Quote(s) + " is not a count"}
	}
	return n, nil
}

// writeErr answers an error: 400 for a bad filter or verb, 409 for a
// count that moved, 422 for a verb the work does not take, 500 otherwise
// (logged, not shown).
func writeErr(w http.ResponseWriter, log *slog.Logger, err error) {
	var inv *InvalidError
	var moved *MovedError
	var many *TooManyError
	var nv *NoVerbError
	switch {
	case errors.As(err, &inv), errors.As(err, &many):
		reply.JSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case errors.As(err, &moved):
		reply.JSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "count": moved.Now})
	case errors.As(err, &nv):
		reply.JSON(w, http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
	default:
		log.Error("work", "err", err)
		reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "the work request failed; the service's log says why"})
	}
}
