// Package httpapi is the ingest HTTP API: depositors submit and follow
// their batches and jobs; operators act on them and on the queue.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/notify"
	"github.com/archivist/archivist/services/curator/ingest/views"
	"github.com/archivist/archivist/services/curator/ingest/withdraw"
)

// PublisherRoutes are the routes a publisher (a depositor) calls.
var PublisherRoutes = []string{"POST /v1/batches", "GET /v1/batches", "GET /v1/jobs", "GET /v1/batches/{id}", "GET /v1/jobs/{id}", "GET /v1/objects", "GET /v1/ingest/history"}

// OperatorRoutes are the reads for the archive's staff who act, not for
// every reader key: the collections' settings (callback URLs, with their
// tokens, and mail addresses) and the mails parked (recipients, others'
// batches).
var OperatorRoutes = []string{"GET /v1/profiles", "GET /v1/profiles/{profile}", "GET /v1/ingest/mail/parked"}

// Routes adds the ingest API to mux:
//
//	POST /v1/batches                          submit (JSON ingest.Submission) → 201 {"batch": ID};
//	                                          with an Idempotency-Key header, a retry → 200, same ID
//	GET  /v1/batches, /v1/jobs                list: ?state=S&submitter=NAME&limit=N (jobs also &batch=ID), newest first
//	GET  /v1/batches/{id}, /v1/jobs/{id}      status, history, report
//
// A publisher deposits as itself into the collections its key names, and
// lists and reads only its own batches and jobs (another's is 404);
// operators and readers see all.
//
//	POST /v1/batches/{id}/{action}            release, delete, update-reporting
//	POST /v1/jobs/{id}/{action}               hold, release, requeue, delete
//	POST /v1/collections/{profile}/hold|release
//	POST /v1/ingest/pause, /v1/ingest/resume, /v1/ingest/cleanup[?older_than=24h]
//	GET  /v1/ingest/status                    batches and jobs by state, with the oldest's age
//	GET  /v1/ingest/history?batch=ID|job=ID   its story (service.History)
//	GET  /v1/ingest/transitions               the transition table
func Routes(mux *http.ServeMux, s *ingest.Store, wd *withdraw.Withdrawer, log *slog.Logger) {
	writeErr := errorWriter(log)
	mux.HandleFunc("POST /v1/batches", func(w http.ResponseWriter, r *http.Request) {
		var sub ingest.Submission
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sub); err != nil {
			writeErr(w, &ingest.InvalidError{Field: "body", Msg: "a JSON submission: " + err.Error()})
			return
		}
		sub.IdempotencyKey = r.Header.Get("Idempotency-Key")
		if err := depositAs(r.Context(), &sub); err != nil {
			writeErr(w, err)
			return
		}
		id, created, err := s.Submit(r.Context(), sub)
		if err != nil {
			writeErr(w, err)
			return
		}
		code := http.StatusCreated
		if !created {
			code = http.StatusOK // a retry of the same submission
		}
		reply.JSON(w, code, map[string]int64{"batch": id})
	})
	status := func(e ingest.Entity) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				writeErr(w, &ingest.InvalidError{Field: "id", Msg: "a number"})
				return
			}
			if err := visible(r.Context(), s, e, id); err != nil {
				writeErr(w, err)
				return
			}
			st, err := views.StatusOf(r.Context(), s, e, id)
			if err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, st)
		}
	}
	act := func(e ingest.Entity) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				writeErr(w, &ingest.InvalidError{Field: "id", Msg: "a number"})
				return
			}
			to, err := s.Act(r.Context(), e, id, r.PathValue("action"), r.URL.Query().Get("confirm") == "true")
			if err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, map[string]any{string(e): id, "state": to})
		}
	}
	list := func(e ingest.Entity) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			f := views.Filter{State: ingest.State(q.Get("state")), Limit: 100, Submitter: q.Get("submitter")}
			if caller, _ := apiauth.Caller(r.Context()); caller.OwnOnly() {
				// A depositor lists its own.
				f.Submitter = caller.Name
			}
			if v := q.Get("limit"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					writeErr(w, &ingest.InvalidError{Field: "limit", Msg: "a number"})
					return
				}
				f.Limit = n
			}
			if v := q.Get("batch"); v != "" && e == ingest.Job {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					writeErr(w, &ingest.InvalidError{Field: "batch", Msg: "a number"})
					return
				}
				f.Batch = n
			}
			out, err := views.List(r.Context(), s, e, f)
			if err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, out)
		}
	}
	mux.HandleFunc("GET /v1/batches", list(ingest.Batch))
	mux.HandleFunc("GET /v1/jobs", list(ingest.Job))
	mux.HandleFunc("GET /v1/batches/{id}", status(ingest.Batch))
	mux.HandleFunc("GET /v1/jobs/{id}", status(ingest.Job))
	mux.HandleFunc("POST /v1/batches/{id}/{action}", act(ingest.Batch))
	mux.HandleFunc("POST /v1/jobs/{id}/{action}", act(ingest.Job))
	mux.HandleFunc("POST /v1/collections/{profile}/{action}", func(w http.ResponseWriter, r *http.Request) {
		p := r.PathValue("profile")
		if err := ingest.CheckName("profile", p); err != nil {
			writeErr(w, err)
			return
		}
		switch r.PathValue("action") {
		case "hold":
			if err := s.HoldCollection(r.Context(), p); err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, map[string]any{"profile": p, "held": true})
		case "release":
			n, err := s.ReleaseCollection(r.Context(), p)
			if err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, map[string]any{"profile": p, "held": false, "released": n})
		default:
			writeErr(w, &ingest.InvalidError{Field: "action", Msg: "hold or release"})
		}
	})
	mux.HandleFunc("POST /v1/ingest/{action}", func(w http.ResponseWriter, r *http.Request) {
		switch a := r.PathValue("action"); a {
		case "pause", "resume":
			if err := s.SetPaused(r.Context(), a == "pause"); err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, map[string]bool{"paused": a == "pause"})
		case "cleanup":
			older := 24 * time.Hour
			if v := r.URL.Query().Get("older_than"); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					writeErr(w, &ingest.InvalidError{Field: "older_than", Msg: "a duration such as 24h"})
					return
				}
				older = d
			}
			n, err := s.Cleanup(r.Context(), older)
			if err != nil {
				writeErr(w, err)
				return
			}
			reply.JSON(w, http.StatusOK, map[string]int{"deleted_batches": n})
		default:
			writeErr(w, &ingest.InvalidError{Field: "action", Msg: "pause, resume or cleanup"})
		}
	})
	// A batch's or job's story as an operator follows it (the dashboard).
	history := func(e ingest.Entity) func(context.Context, string) (service.History, error) {
		return func(ctx context.Context, id string) (service.History, error) {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				if err := visible(ctx, s, e, n); err != nil {
					return service.History{}, err
				}
			}
			return History(ctx, s, e, id)
		}
	}
	batchHistory := service.HistoryHandler(log, "batch", ingest.ErrNotFound, history(ingest.Batch))
	jobHistory := service.HistoryHandler(log, "job", ingest.ErrNotFound, history(ingest.Job))
	mux.HandleFunc("GET /v1/ingest/status", func(w http.ResponseWriter, r *http.Request) {
		c, err := views.Counts(r.Context(), s)
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, map[string]any{"batches": c[ingest.Batch], "jobs": c[ingest.Job]})
	})
	mux.HandleFunc("GET /v1/ingest/history", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("job") {
			jobHistory(w, r)
			return
		}
		batchHistory(w, r)
	})
	mux.HandleFunc("GET /v1/ingest/transitions", func(w http.ResponseWriter, r *http.Request) {
		reply.JSON(w, http.StatusOK, ingest.Transitions)
	})
	profileRoutes(mux, s, writeErr)
	objectRoutes(mux, wd, writeErr)
}

// objectRoutes are the inventory's objects:
//
//	GET  /v1/objects?ark=ARK        an object, its versions, withdrawn ones as tombstones
//	POST /v1/objects/withdraw       JSON withdraw.Request (operators): the object, or a version
//	POST /v1/objects/reinstate      JSON {"ark", "reason"} (operators): a withdrawn object takes deposits again
func objectRoutes(mux *http.ServeMux, wd *withdraw.Withdrawer, writeErr func(http.ResponseWriter, error)) {
	mux.HandleFunc("GET /v1/objects", func(w http.ResponseWriter, r *http.Request) {
		var depositor string
		if caller, _ := apiauth.Caller(r.Context()); caller.OwnOnly() {
			depositor = caller.Name
		}
		o, err := withdraw.Show(r.Context(), wd.DB, r.URL.Query().Get("ark"), depositor)
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, o)
	})
	mux.HandleFunc("POST /v1/objects/withdraw", func(w http.ResponseWriter, r *http.Request) {
		var req withdraw.Request
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeErr(w, &ingest.InvalidError{Field: "body", Msg: "JSON {\"ark\", \"version\", \"reason\"}: " + err.Error()})
			return
		}
		caller, _ := apiauth.Caller(r.Context())
		req.By = caller.Name
		res, err := wd.Withdraw(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("POST /v1/objects/reinstate", func(w http.ResponseWriter, r *http.Request) {
		var req withdraw.Request
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Version != 0 {
			writeErr(w, &ingest.InvalidError{Field: "body", Msg: "JSON {\"ark\", \"reason\"}: a whole object is reinstated"})
			return
		}
		caller, _ := apiauth.Caller(r.Context())
		req.By = caller.Name
		o, err := wd.Reinstate(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, o)
	})
}

// profileRoutes are the collections' notification settings and the mails
// the sender gave up on:
//
//	GET /v1/profiles, /v1/profiles/{profile}   settings (a collection never set: its defaults)
//	PUT /v1/profiles/{profile}                 JSON notify.Settings (operators)
//	GET /v1/ingest/mail/parked                 mails parked, with their reasons
func profileRoutes(mux *http.ServeMux, s *ingest.Store, writeErr func(http.ResponseWriter, error)) {
	settings := &notify.Store{DB: s.DB}
	mux.HandleFunc("GET /v1/profiles", func(w http.ResponseWriter, r *http.Request) {
		list, err := settings.List(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, list)
	})
	mux.HandleFunc("GET /v1/profiles/{profile}", func(w http.ResponseWriter, r *http.Request) {
		st, err := settings.Get(r.Context(), r.PathValue("profile"))
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("PUT /v1/profiles/{profile}", func(w http.ResponseWriter, r *http.Request) {
		st := notify.Defaults(r.PathValue("profile"))
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil {
			writeErr(w, &ingest.InvalidError{Field: "body", Msg: "JSON settings: " + err.Error()})
			return
		}
		st.Profile = r.PathValue("profile")
		if err := settings.Put(r.Context(), st); err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET /v1/ingest/mail/parked", func(w http.ResponseWriter, r *http.Request) {
		list, err := notify.ParkedMails(r.Context(), s.DB, 1000)
		if err != nil {
			writeErr(w, err)
			return
		}
		reply.JSON(w, http.StatusOK, list)
	})
}

// ForbiddenError is a request its caller may not make (a deposit as
// another depositor or into a collection its key does not name).
type ForbiddenError struct{ Msg string }

func (e *ForbiddenError) Error() string { return e.Msg }

// depositAs binds a submission to its caller: the submitter is the key's
// name (an operator may name another, acting for a depositor), and the
// collection must be one the key deposits into (an operator's: any).
func depositAs(ctx context.Context, sub *ingest.Submission) error {
	caller, ok := apiauth.Caller(ctx)
	if !ok {
		return &ForbiddenError{"no caller"}
	}
	operator := slices.Contains(caller.Roles, apiauth.Operator)
	sub.ARKShoulders = strings.Join(caller.ARKs, ",")
	switch {
	case sub.Submitter == "":
		sub.Submitter = caller.Name
	case sub.Submitter != caller.Name && !operator:
		return &ForbiddenError{fmt.Sprintf("your key deposits as %q, not %q", caller.Name, sub.Submitter)}
	}
	if sub.Profile != "" && !operator && !caller.MayDeposit(sub.Profile) {
		if len(caller.Collections) == 0 {
			return &ForbiddenError{fmt.Sprintf("the key %q deposits into no collection (its keys-file line has no collections=…, or its token no collections claim)", caller.Name)}
		}
		return &ForbiddenError{fmt.Sprintf("the key %q deposits into %s, not %q", caller.Name, strings.Join(caller.Collections, ", "), sub.Profile)}
	}
	return nil
}

// errorWriter answers a request that failed: 4xx saying what is wrong with
// it, or, for an internal error, 500 "internal error" with an id that is in
// the log with the error (its text, which may name hosts, tables or
// credentials, stays in the log).
func errorWriter(log *slog.Logger) func(http.ResponseWriter, error) {
	return func(w http.ResponseWriter, err error) { writeErrLog(w, log, err) }
}

func writeErrLog(w http.ResponseWriter, log *slog.Logger, err error) {
	var inv *ingest.InvalidError
	var nf *ingest.NotFoundError
	var ref *ingest.RefusedError
	var conflict *ingest.ConflictError
	var forbidden *ForbiddenError
	var held *withdraw.HeldError
	switch {
	case errors.As(err, &forbidden):
		reply.JSON(w, http.StatusForbidden, map[string]string{"error": err.Error()})
	case errors.As(err, &inv):
		reply.JSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "field": inv.Field})
	case errors.As(err, &nf):
		reply.JSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case errors.As(err, &ref), errors.As(err, &conflict):
		reply.JSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case errors.As(err, &held):
		w.Header().Set("Retry-After", "5")
		reply.JSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "job": held.Job})
	default:
		reply.Internal(w, log, err, "ingest API: internal error")
	}
}
