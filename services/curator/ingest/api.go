package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/service"
)

// Status is a batch's or job's state, history and (for a batch) its jobs
// by state and report.
type Status struct {
	Entity   Entity          `json:"entity"`
	ID       int64           `json:"id"`
	State    State           `json:"state"`
	Error    string          `json:"error,omitempty"`
	Jobs     map[State]int   `json:"jobs,omitempty"`
	History  []HistoryEntry  `json:"history"`
	Report   json.RawMessage `json:"report,omitempty"`
	Job      *JobRow         `json:"job,omitempty"`
	Profile  string          `json:"profile"`
	Priority int             `json:"priority,omitempty"`
}

// HistoryEntry is one transition.
type HistoryEntry struct {
	From   State     `json:"from"`
	To     State     `json:"to"`
	By     By        `json:"by"`
	Action string    `json:"action"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// Status reads a batch's or job's status.
func (s *Store) Status(ctx context.Context, e Entity, id int64) (*Status, error) {
	st := &Status{Entity: e, ID: id, History: []HistoryEntry{}}
	if e == Batch {
		var report []byte
		err := s.db.QueryRow(ctx, `SELECT state, error, profile, report FROM curator.batches WHERE id = $1`, id).Scan(&st.State, &st.Error, &st.Profile, &report)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, &NotFoundError{e, id}
		} else if err != nil {
			return nil, err
		}
		st.Report = report
		st.Jobs = map[State]int{}
		rows, err := s.db.Query(ctx, `SELECT state, count(*) FROM curator.jobs WHERE batch_id = $1 GROUP BY state`, id)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k State
			var n int
			rows.Scan(&k, &n)
			st.Jobs[k] = n
		}
		rows.Close()
	} else {
		j, err := s.Job(ctx, id)
		if err != nil {
			return nil, err
		}
		// The view shows no credentials: payload URLs without user info or
		// query string.
		j.PayloadURL = redactURL(j.PayloadURL)
		files := make([]File, len(j.Files))
		for i, f := range j.Files {
			f.URL = redactURL(f.URL)
			files[i] = f
		}
		j.Files = files
		st.State, st.Error, st.Profile, st.Priority, st.Job = j.State, j.Error, j.Profile, j.Priority, j
	}
	rows, err := s.db.Query(ctx, `SELECT from_state, to_state, by, action, detail, at FROM curator.ingest_history
		WHERE entity = $1 AND entity_id = $2 ORDER BY id`, e, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var h HistoryEntry
		if err := rows.Scan(&h.From, &h.To, &h.By, &h.Action, &h.Detail, &h.At); err != nil {
			return nil, err
		}
		st.History = append(st.History, h)
	}
	return st, rows.Err()
}

// PublisherRoutes are the routes a publisher (a depositor) calls.
var PublisherRoutes = []string{"POST /v1/batches"}

// Routes adds the ingest API to mux:
//
//	POST /v1/batches                          submit (JSON Submission) → 201 {"batch": ID};
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
func Routes(mux *http.ServeMux, s *Store, log *slog.Logger) {
	writeErr := errorWriter(log)
	mux.HandleFunc("POST /v1/batches", func(w http.ResponseWriter, r *http.Request) {
		var sub Submission
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sub); err != nil {
			writeErr(w, &InvalidError{"body", "a JSON submission: " + err.Error()})
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
		writeJSON(w, code, map[string]int64{"batch": id})
	})
	status := func(e Entity) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				writeErr(w, &InvalidError{"id", "a number"})
				return
			}
			if err := s.visible(r.Context(), e, id); err != nil {
				writeErr(w, err)
				return
			}
			st, err := s.Status(r.Context(), e, id)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, st)
		}
	}
	act := func(e Entity) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				writeErr(w, &InvalidError{"id", "a number"})
				return
			}
			to, err := s.Act(r.Context(), e, id, r.PathValue("action"))
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{string(e): id, "state": to})
		}
	}
	list := func(e Entity) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			f := Filter{State: State(q.Get("state")), Limit: 100, Submitter: q.Get("submitter")}
			if caller, _ := service.Caller(r.Context()); caller.OwnOnly() {
				// A depositor lists its own.
				f.Submitter = caller.Name
			}
			if v := q.Get("limit"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					writeErr(w, &InvalidError{"limit", "a number"})
					return
				}
				f.Limit = n
			}
			if v := q.Get("batch"); v != "" && e == Job {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					writeErr(w, &InvalidError{"batch", "a number"})
					return
				}
				f.Batch = n
			}
			out, err := s.List(r.Context(), e, f)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, out)
		}
	}
	mux.HandleFunc("GET /v1/batches", list(Batch))
	mux.HandleFunc("GET /v1/jobs", list(Job))
	mux.HandleFunc("GET /v1/batches/{id}", status(Batch))
	mux.HandleFunc("GET /v1/jobs/{id}", status(Job))
	mux.HandleFunc("POST /v1/batches/{id}/{action}", act(Batch))
	mux.HandleFunc("POST /v1/jobs/{id}/{action}", act(Job))
	mux.HandleFunc("POST /v1/collections/{profile}/{action}", func(w http.ResponseWriter, r *http.Request) {
		p := r.PathValue("profile")
		switch r.PathValue("action") {
		case "hold":
			if err := s.HoldCollection(r.Context(), p); err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"profile": p, "held": true})
		case "release":
			n, err := s.ReleaseCollection(r.Context(), p)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"profile": p, "held": false, "released": n})
		default:
			writeErr(w, &InvalidError{"action", "hold or release"})
		}
	})
	mux.HandleFunc("POST /v1/ingest/{action}", func(w http.ResponseWriter, r *http.Request) {
		switch a := r.PathValue("action"); a {
		case "pause", "resume":
			if err := s.SetPaused(r.Context(), a == "pause"); err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]bool{"paused": a == "pause"})
		case "cleanup":
			older := 24 * time.Hour
			if v := r.URL.Query().Get("older_than"); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					writeErr(w, &InvalidError{"older_than", "a duration such as 24h"})
					return
				}
				older = d
			}
			n, err := s.Cleanup(r.Context(), older)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]int{"deleted_batches": n})
		default:
			writeErr(w, &InvalidError{"action", "pause, resume or cleanup"})
		}
	})
	// A batch's or job's story as an operator follows it (the dashboard).
	history := func(e Entity) func(context.Context, string) (service.History, error) {
		return func(ctx context.Context, id string) (service.History, error) {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				if err := s.visible(ctx, e, n); err != nil {
					return service.History{}, err
				}
			}
			return s.History(ctx, e, id)
		}
	}
	batchHistory := service.HistoryHandler(log, "batch", ErrNotFound, history(Batch))
	jobHistory := service.HistoryHandler(log, "job", ErrNotFound, history(Job))
	mux.HandleFunc("GET /v1/ingest/status", func(w http.ResponseWriter, r *http.Request) {
		c, err := s.Counts(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"batches": c[Batch], "jobs": c[Job]})
	})
	mux.HandleFunc("GET /v1/ingest/history", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("job") {
			jobHistory(w, r)
			return
		}
		batchHistory(w, r)
	})
	mux.HandleFunc("GET /v1/ingest/transitions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Transitions)
	})
}

// ForbiddenError is a request its caller may not make (a deposit as
// another depositor or into a collection its key does not name).
type ForbiddenError struct{ Msg string }

func (e *ForbiddenError) Error() string { return e.Msg }

// depositAs binds a submission to its caller: the submitter is the key's
// name (an operator may name another, acting for a depositor), and the
// collection must be one the key deposits into (an operator's: any).
func depositAs(ctx context.Context, sub *Submission) error {
	caller, ok := service.Caller(ctx)
	if !ok {
		return &ForbiddenError{"no caller"}
	}
	operator := slices.Contains(caller.Roles, service.Operator)
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

// visible is nil when the caller may read batch or job id: an operator or
// reader any, a depositor its own. Another's is "not found", as an unknown
// id: a depositor learns nothing of others' work, not even that it exists.
func (s *Store) visible(ctx context.Context, e Entity, id int64) error {
	caller, _ := service.Caller(ctx)
	if !caller.OwnOnly() {
		return nil
	}
	var submitter string
	err := s.db.QueryRow(ctx, `SELECT submitter FROM `+table(e)+` WHERE id = $1`, id).Scan(&submitter)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && submitter != caller.Name) {
		return &NotFoundError{e, id}
	}
	if err != nil {
		return fmt.Errorf("%s %d: %w", e, id, err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// errorWriter answers a request that failed: 4xx saying what is wrong with
// it, or, for an internal error, 500 "internal error" with an id that is in
// the log with the error (its text, which may name hosts, tables or
// credentials, stays in the log).
func errorWriter(log *slog.Logger) func(http.ResponseWriter, error) {
	return func(w http.ResponseWriter, err error) { writeErrLog(w, log, err) }
}

func writeErrLog(w http.ResponseWriter, log *slog.Logger, err error) {
	var inv *InvalidError
	var nf *NotFoundError
	var ref *RefusedError
	var conflict *ConflictError
	var forbidden *ForbiddenError
	switch {
	case errors.As(err, &forbidden):
		writeJSON(w, http.StatusForbidden, map[string]string{"error": err.Error()})
	case errors.As(err, &inv):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "field": inv.Field})
	case errors.As(err, &nf):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case errors.As(err, &ref), errors.As(err, &conflict):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	default:
		id := service.ErrorID()
		log.Error("ingest API: internal error", "err", err, "error_id", id)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error", "error_id": id})
	}
}

// scrubURLs is text (an error, a move's detail) with every URL in it
// redacted as redactURL does, before it is stored or shown.
func scrubURLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	return urlInText.ReplaceAllStringFunc(text, redactURL)
}

// urlInText finds URLs in text: a scheme, then up to white space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// redactURL is a URL as a job view shows it: without user info or query
// string, which may carry credentials or presigned tokens.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "REDACTED"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	u.Fragment = ""
	return u.String()
}
