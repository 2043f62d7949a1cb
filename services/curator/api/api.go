// Package api is the curator's HTTP API: curation events posted by systems
// that do not speak NATS (published onto the bus, so they take the same path
// as every other curation event), and reads of the stored records.
package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/completeness"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// Server serves the API.
type Server struct {
	bus *bus.Bus
	cat *catalog.Catalog
	log *slog.Logger

	secretMu sync.Mutex
	secret   []byte // curator.secrets' idempotency secret, once read

	// Decide takes an operator's decision (a merge, a split, or either
	// taken back) and publishes the match results it makes; nil: the
	// decisions route answers 503.
	Decide func(ctx context.Context, d matcher.Decision) (matcher.Decision, error)
}

// New returns the API over a bus (to publish) and the catalog (to read).
func New(b *bus.Bus, cat *catalog.Catalog, log *slog.Logger) *Server {
	return &Server{bus: b, cat: cat, log: log}
}

// Handler routes the API.
//
//	POST /v1/episodes       an EpisodeUpserted payload (JSON or msgpack) → 202
//	POST /v1/clips          a ClipUpserted payload → 202
//	GET  /v1/episodes/{key} the stored source record, key "source:id"
//	GET  /v1/clips/{key}    the stored source record
//	GET  /v1/works/episodes/{key}, /v1/works/clips/{key}
//	                        the work a key resolves to: graph, sources,
//	                        versions and redirects (merger.View)
//	GET  /v1/works/episodes/{key}/explain, /v1/works/clips/{key}/explain
//	                        why the key's work is what it is, now or ?at=TIME:
//	                        each field's record, version and rule, the links
//	                        and refused links; with ?since=TIME, what changed
//	                        since (merger.Explanation, merger.Change)
//	POST /v1/works/episodes/decisions, /v1/works/clips/decisions
//	                        an operator's merge, split, unmerge or unsplit
//	                        ({"action", "a", "b", "reason"}) → 201, in force
//	                        and the graphs matched again (matcher.Decide)
//	GET  /v1/works/episodes/decisions?key=K, /v1/works/clips/decisions?key=K
//	                        the decisions about a record, oldest first
//	GET  /v1/curation/status records by source, works by state, stale updates
//
// A POST's event is sent now by the producer named in the Archivist-Producer
// header (default "http"); an Idempotency-Key header becomes the event id, so
// a retried POST is stored once.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Routes(mux)
	return mux
}

// PublisherRoutes are the routes a publisher calls.
var PublisherRoutes = []string{"POST /v1/episodes", "POST /v1/clips"}

// Routes adds the API's routes to mux (see Handler).
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/episodes", func(w http.ResponseWriter, r *http.Request) {
		post[events.EpisodeUpserted](s, w, r)
	})
	mux.HandleFunc("POST /v1/clips", func(w http.ResponseWriter, r *http.Request) {
		post[events.ClipUpserted](s, w, r)
	})
	mux.HandleFunc("GET /v1/episodes/{id}", func(w http.ResponseWriter, r *http.Request) { s.get(w, r, catalog.Episode) })
	mux.HandleFunc("GET /v1/clips/{id}", func(w http.ResponseWriter, r *http.Request) { s.get(w, r, catalog.Clip) })
	mux.HandleFunc("GET /v1/works/episodes/{key}", func(w http.ResponseWriter, r *http.Request) { s.work(w, r, catalog.Episode) })
	mux.HandleFunc("GET /v1/works/clips/{key}", func(w http.ResponseWriter, r *http.Request) { s.work(w, r, catalog.Clip) })
	mux.HandleFunc("GET /v1/works/episodes/{key}/explain", func(w http.ResponseWriter, r *http.Request) { s.explain(w, r, catalog.Episode) })
	mux.HandleFunc("GET /v1/works/clips/{key}/explain", func(w http.ResponseWriter, r *http.Request) { s.explain(w, r, catalog.Clip) })
	mux.HandleFunc("POST /v1/works/episodes/decisions", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, catalog.Episode) })
	mux.HandleFunc("POST /v1/works/clips/decisions", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, catalog.Clip) })
	mux.HandleFunc("GET /v1/works/episodes/decisions", func(w http.ResponseWriter, r *http.Request) { s.decisions(w, r, catalog.Episode) })
	mux.HandleFunc("GET /v1/works/clips/decisions", func(w http.ResponseWriter, r *http.Request) { s.decisions(w, r, catalog.Clip) })
	mux.HandleFunc("GET /v1/curation/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.cat.Status(r.Context())
		var passes map[catalog.Kind]completeness.Pass
		if err == nil {
			passes, err = completeness.LastPasses(r.Context(), s.cat.DB())
		}
		if err != nil {
			id := reply.ErrorID()
			s.log.Error("curation status", "err", err, "error_id", id)
			reply.JSON(w, http.StatusInternalServerError, Problem{Error: "internal error", ErrorID: id})
			return
		}
		reply.JSON(w, http.StatusOK, Status{Status: st, Invariant: passes})
	})
}

// Status is the curation status: records by source, works by state, stale
// updates, and the invariant check's last pass of each kind (absent before
// the first ends).
type Status struct {
	catalog.Status
	Invariant map[catalog.Kind]completeness.Pass `json:"invariant"`
}

// Accepted is the body of a 202.
type Accepted struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	SentAt    time.Time `json:"sent_at"`
	Stream    string    `json:"stream"`
	Sequence  uint64    `json:"sequence"`
	Duplicate bool      `json:"duplicate"`
}

// Problem is the body of an error response.
type Problem struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	// ErrorID, on an internal error, is the id of its log entry.
	ErrorID string `json:"error_id,omitempty"`
}

func post[T any, PT interface {
	*T
	events.Event
}](s *Server, w http.ResponseWriter, r *http.Request) {
	ev := PT(new(T))
	if err := decodeBody(w, r, ev); err != nil {
		s.problem(w, err)
		return
	}
	if err := ev.Validate(); err != nil {
		s.problem(w, err)
		return
	}
	// Who sends the record is who authenticated: a publisher's key names
	// its producer and binds its source, whatever the body or a header say.
	// Without authentication (API_AUTH=off) the Archivist-Producer header
	// names the producer (default "http").
	producer := r.Header.Get("Archivist-Producer")
	if producer == "" {
		producer = "http"
	}
	caller, _ := apiauth.Caller(r.Context())
	if caller.Source != "" {
		producer = caller.Name
		// An operator may also publish for another source (to correct a
		// record, say); a publisher only as its own.
		if err := bindSource(ev, caller.Source, slices.Contains(caller.Roles, apiauth.Operator)); err != nil {
			s.problem(w, err)
			return
		}
	}
	env, err := events.New(producer, ev)
	if err != nil {
		s.problem(w, err)
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if err := events.ValidateID("Idempotency-Key", key); err != nil {
			s.problem(w, err)
			return
		}
		// The key names the event: a retry is the same event, sent at the
		// same time, so it is de-duplicated on the bus and a replay in
		// PostgreSQL. Keys are the caller's own: another caller's same key
		// names another event.
		env.ID = key
		if caller.Source != "" {
			env.ID = caller.Name + "/" + key
		}
		if id, err := uuid.Parse(key); err == nil && id.Version() == 7 {
			sec, nsec := id.Time().UnixTime()
			at := time.Unix(sec, nsec).UTC()
			// The key's time becomes the event's version: one from the
			// future would win over every later change, for ever.
			if at.After(events.Now().Add(MaxClockSkew)) {
				s.problem(w, &badRequest{status: http.StatusBadRequest, field: "Idempotency-Key",
					msg: fmt.Sprintf("the UUIDv7 key's time %s is more than %s in the future", at.Format(time.RFC3339), MaxClockSkew)})
				return
			}
			env.SentAt = at
		}
	}
	subject, err := events.SubjectOf(producer, ev)
	if err != nil {
		s.problem(w, err)
		return
	}
	// On the bus the event's message id is an HMAC of its id under the
	// curator's secret: CURATION de-duplicates by message id over the
	// whole stream, and a NATS publisher could otherwise send "radio/KEY"
	// first and have radio's POST taken as its duplicate (N31).
	msgID, err := s.msgID(r.Context(), env.ID)
	if err != nil {
		s.log.Error("read the idempotency secret", "err", err)
		reply.JSON(w, http.StatusServiceUnavailable, Problem{Error: "the curator's database did not answer; retry with the same Idempotency-Key"})
		return
	}
	ack, err := s.bus.Publish(r.Context(), subject, env, jetstream.WithMsgID(msgID))
	if bus.IsFull(err) {
		// The source's bound of events waiting for the curator is
		// reached (a flood, or a full resend outrunning it): slow down.
		s.log.Warn("curation event refused: its source's events waiting for the curator are at their bound", "subject", subject, "event", env.ID)
		w.Header().Set("Retry-After", "5")
		reply.JSON(w, http.StatusServiceUnavailable, Problem{Error: fmt.Sprintf("%d events of this source wait for the curator (events.MaxCurationPerSubject): retry with the same Idempotency-Key after the Retry-After seconds", events.MaxCurationPerSubject)})
		return
	}
	if err != nil {
		s.log.Error("publish curation event", "err", err, "type", env.Type, "event", env.ID)
		reply.JSON(w, http.StatusServiceUnavailable, Problem{Error: "the event bus did not accept the event; retry with the same Idempotency-Key"})
		return
	}
	reply.JSON(w, http.StatusAccepted, Accepted{ID: env.ID, Type: env.Type, SentAt: env.SentAt, Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate})
}

// msgID is the bus message id of an HTTP event with id: "http:" and an
// HMAC-SHA256 of the id under the curator's idempotency secret (read once,
// shared by every replica through the database), which no publisher
// knows, so none can take it first.
func (s *Server) msgID(ctx context.Context, id string) (string, error) {
	s.secretMu.Lock()
	defer s.secretMu.Unlock()
	if s.secret == nil {
		var v string
		if err := s.cat.DB().QueryRow(ctx, `SELECT value FROM curator.secrets WHERE name = 'idempotency'`).Scan(&v); err != nil {
			return "", err
		}
		s.secret = []byte(v)
	}
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(id))
	return "http:" + hex.EncodeToString(m.Sum(nil)), nil
}

// MaxClockSkew is how far in the future an event time taken from a UUIDv7
// Idempotency-Key may be (the bound of every curation event's time).
const MaxClockSkew = events.MaxClockSkew

// bindSource sets a curated record's source to the publisher's, refusing a
// body that names another unless anySource.
func bindSource(ev events.Event, source string, anySource bool) error {
	var a *events.CuratedAudio
	switch e := ev.(type) {
	case *events.EpisodeUpserted:
		a = (*events.CuratedAudio)(e)
	case *events.ClipUpserted:
		a = (*events.CuratedAudio)(e)
	default:
		return nil
	}
	if a.Source != "" && a.Source != source {
		if anySource {
			return nil
		}
		return &badRequest{status: http.StatusForbidden, field: "source",
			msg: fmt.Sprintf("your key publishes as source %q, not %q", source, a.Source)}
	}
	a.Source = source
	return nil
}

// badRequest is a client error with the field it concerns.
type badRequest struct {
	status int
	field  string
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil && r.Header.Get("Content-Type") != "" {
		return &badRequest{status: http.StatusUnsupportedMediaType, msg: "unreadable Content-Type: " + err.Error()}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &badRequest{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body larger than %d bytes", MaxBody)}
		}
		return &badRequest{status: http.StatusBadRequest, msg: "reading body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &badRequest{status: http.StatusBadRequest, msg: "empty body"}
	}
	switch ct {
	case "", "application/json":
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return jsonProblem(err)
		}
		if dec.More() {
			return &badRequest{status: http.StatusBadRequest, msg: "body holds more than one JSON value"}
		}
	case "application/msgpack", "application/x-msgpack", "application/vnd.msgpack":
		if err := events.UnmarshalMsgpack(body, v, events.DefaultLimits, true); err != nil {
			return &badRequest{status: http.StatusBadRequest, msg: "invalid msgpack: " + err.Error()}
		}
	default:
		return &badRequest{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("Content-Type %q: send application/json or application/msgpack", ct)}
	}
	return nil
}

func jsonProblem(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return &badRequest{status: http.StatusBadRequest, field: te.Field, msg: fmt.Sprintf("%s: must be a %s, not a JSON %s", te.Field, te.Type, te.Value)}
	case errors.As(err, &se):
		return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &badRequest{status: http.StatusBadRequest, field: f, msg: fmt.Sprintf("%s: unknown field", f)}
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return &badRequest{status: http.StatusBadRequest, msg: "a time is not RFC 3339 (e.g. 2026-01-02T15:04:05Z): " + err.Error()}
	}
	return &badRequest{status: http.StatusBadRequest, msg: "invalid JSON: " + err.Error()}
}

// problem answers a request that failed: 4xx naming the field, or, for an
// internal error, 500 "internal error" with an id that is in the log with
// the error.
func (s *Server) problem(w http.ResponseWriter, err error) {
	var br *badRequest
	if errors.As(err, &br) {
		reply.JSON(w, br.status, Problem{Error: br.msg, Field: br.field})
		return
	}
	if fe, ok := events.AsFieldError(err); ok {
		reply.JSON(w, http.StatusBadRequest, Problem{Error: fe.Error(), Field: fe.Field})
		return
	}
	id := reply.ErrorID()
	s.log.Error("curation API: internal error", "err", err, "error_id", id)
	reply.JSON(w, http.StatusInternalServerError, Problem{Error: "internal error", ErrorID: id})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, k catalog.Kind) {
	rec, err := s.cat.Get(r.Context(), k, r.PathValue("id"))
	if errors.Is(err, catalog.ErrNotFound) {
		reply.JSON(w, http.StatusNotFound, Problem{Error: err.Error()})
		return
	}
	if err != nil {
		s.log.Error("read record", "err", err, "kind", k, "id", r.PathValue("id"))
		reply.JSON(w, http.StatusInternalServerError, Problem{Error: "reading the record failed"})
		return
	}
	refused, err := matcher.RefusedLinks(r.Context(), s.cat.DB(), k, rec.Key())
	if err != nil {
		s.log.Error("read refused links", "err", err, "kind", k, "id", r.PathValue("id"))
		reply.JSON(w, http.StatusInternalServerError, Problem{Error: "reading the record failed"})
		return
	}
	reply.JSON(w, http.StatusOK, recordView{Record: rec, RefusedSameAs: refused})
}

// recordView is a record as GET shows it: with the same-as links the
// matcher refused, and why.
type recordView struct {
	catalog.Record
	RefusedSameAs []matcher.Refused `json:"refused_same_as,omitempty"`
}

func (s *Server) work(w http.ResponseWriter, r *http.Request, k catalog.Kind) {
	v, err := merger.Show(r.Context(), s.cat.DB(), k, r.PathValue("key"))
	if errors.Is(err, merger.ErrNotFound) {
		reply.JSON(w, http.StatusNotFound, Problem{Error: err.Error()})
		return
	}
	if err != nil {
		s.log.Error("read work", "err", err, "kind", k, "key", r.PathValue("key"))
		reply.JSON(w, http.StatusInternalServerError, Problem{Error: "reading the work failed"})
		return
	}
	reply.JSON(w, http.StatusOK, v)
}

// Explained is the answer of GET .../explain: the key's work explained at
// At (now if not asked) and, with since, explained then and what changed.
type Explained struct {
	Explanation merger.Explanation  `json:"explanation"`
	Since       *merger.Explanation `json:"since,omitempty"`
	Changes     []merger.Change     `json:"changes,omitempty"`
}

func (s *Server) explain(w http.ResponseWriter, r *http.Request, k catalog.Kind) {
	key := r.PathValue("key")
	times := map[string]time.Time{}
	for _, name := range []string{"at", "since"} {
		if v := r.URL.Query().Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				reply.JSON(w, http.StatusBadRequest, Problem{Error: name + ": an RFC 3339 time (2026-01-02T03:04:05Z), not " + strconv.Quote(v)})
				return
			}
			times[name] = t
		}
	}
	var out Explained
	var err error
	out.Explanation, err = merger.Explain(r.Context(), s.cat.DB(), k, key, times["at"])
	if since, ok := times["since"]; ok && err == nil {
		var before merger.Explanation
		if before, err = merger.Explain(r.Context(), s.cat.DB(), k, key, since); err == nil {
			out.Since, out.Changes = &before, merger.Changes(before, out.Explanation)
		}
	}
	if errors.Is(err, merger.ErrNoHistory) {
		reply.JSON(w, http.StatusNotFound, Problem{Error: err.Error()})
		return
	}
	if err != nil {
		s.log.Error("explain work", "err", err, "kind", k, "key", key)
		reply.JSON(w, http.StatusInternalServerError, Problem{Error: "explaining the work failed"})
		return
	}
	reply.JSON(w, http.StatusOK, out)
}

// DecisionRequest is the body of POST .../decisions.
type DecisionRequest struct {
	// Action is merge, unmerge, split or unsplit.
	Action string `json:"action"`
	// A is the record decided about; B the other record of a merge.
	A string `json:"a"`
	B string `json:"b"`
	// Reason is why, kept with the decision (required).
	Reason string `json:"reason"`
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, k catalog.Kind) {
	if s.Decide == nil {
		reply.JSON(w, http.StatusServiceUnavailable, Problem{Error: "decisions are taken by the curator service"})
		return
	}
	var req DecisionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		reply.JSON(w, http.StatusBadRequest, Problem{Error: "body: a JSON object {\"action\", \"a\", \"b\", \"reason\"}: " + err.Error()})
		return
	}
	by := "anonymous"
	if id, ok := apiauth.Caller(r.Context()); ok {
		by = id.Name
	}
	d, err := s.Decide(r.Context(), matcher.Decision{Kind: string(k), Action: req.Action, A: req.A, B: req.B, By: by, Reason: req.Reason})
	if errors.Is(err, matcher.ErrBadDecision) {
		reply.JSON(w, http.StatusBadRequest, Problem{Error: err.Error()})
		return
	}
	if err != nil {
		s.log.Error("take a curation decision", "err", err, "kind", k, "action", req.Action, "a", req.A, "b", req.B, "by", by)
		reply.JSON(w, http.StatusInternalServerError, Problem{Error: "taking the decision failed"})
		return
	}
	s.log.Warn("curation decision taken", "kind", k, "action", d.Action, "a", d.A, "b", d.B, "by", d.By, "reason", d.Reason, "decision", d.ID)
	reply.JSON(w, http.StatusCreated, d)
}

func (s *Server) decisions(w http.ResponseWriter, r *http.Request, k catalog.Kind) {
	key := r.URL.Query().Get("key")
	if key == "" {
		reply.JSON(w, http.StatusBadRequest, Problem{Error: "key: the record (source:id) whose decisions to list"})
		return
	}
	ds, err := matcher.Decisions(r.Context(), s.cat.DB(), k, key)
	if err != nil {
		s.log.Error("list curation decisions", "err", err, "kind", k, "key", key)
		reply.JSON(w, http.StatusInternalServerError, Problem{Error: "listing the decisions failed"})
		return
	}
	if ds == nil {
		ds = []matcher.Decision{}
	}
	reply.JSON(w, http.StatusOK, ds)
}
