package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/archivist/archivist/pkg/reply"
	"github.com/jackc/pgx/v5"
)

// History is one item of a pipeline as an operator follows it: what it is,
// its state now, a few facts, and what happened to it, oldest first. Every
// pipeline answers GET /v1/<pipeline>/history?<kind>=<id> with one (an
// episode, a batch or job, an archive file, a stored object), and the
// dashboard shows it as it is.
type History struct {
	// Kind is the item's kind: episode, batch, job, file, object.
	Kind string `json:"kind"`
	// ID is the item's id or key.
	ID string `json:"id"`
	// State is where the item is now (the pipeline's own word for it).
	State string `json:"state"`
	// Facts are the item's details worth a glance, in order.
	Facts []Fact `json:"facts"`
	// Events are what happened to the item, oldest first.
	Events []HistoryEvent `json:"events"`
	// TraceID is the W3C trace id of the request or message that brought
	// the item in, where tracing was on (or a traced caller sent it).
	TraceID string `json:"trace_id,omitempty"`
}

// Fact is a named detail of an item.
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HistoryEvent is one thing that happened to an item.
type HistoryEvent struct {
	At     time.Time `json:"at"`
	What   string    `json:"what"`
	Detail string    `json:"detail,omitempty"`
}

// MaxHistoryEvents bounds the events of one history (the newest are kept).
const MaxHistoryEvents = 200

// SortHistory puts h's events in time order and keeps the newest
// MaxHistoryEvents.
func SortHistory(h *History) {
	slices.SortStableFunc(h.Events, func(a, b HistoryEvent) int { return a.At.Compare(b.At) })
	if n := len(h.Events); n > MaxHistoryEvents {
		h.Events = h.Events[n-MaxHistoryEvents:]
	}
}

// ScanEvents appends to h the events of rows (at, what, detail), and closes
// them: the histories read as one UNION of their tables' events.
func ScanEvents(h *History, rows pgx.Rows) error {
	defer rows.Close()
	for rows.Next() {
		var e HistoryEvent
		if err := rows.Scan(&e.At, &e.What, &e.Detail); err != nil {
			return err
		}
		h.Events = append(h.Events, e)
	}
	return rows.Err()
}

// HistoryHandler answers GET /v1/<pipeline>/history?<param>=ID with the
// History get reads: 400 naming param when it is missing or longer than
// 1,024 bytes, 404 when get's error is notFound, 500 "internal error" with
// an id that is in the log for any other error.
func HistoryHandler(log *slog.Logger, param string, notFound error, get func(ctx context.Context, id string) (History, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get(param)
		answer := func(code int, v any) { reply.JSON(w, code, v) }
		if id == "" || len(id) > 1024 {
			answer(http.StatusBadRequest, map[string]string{"error": "the query parameter " + param + " names the item (at most 1,024 bytes)"})
			return
		}
		h, err := get(r.Context(), id)
		switch {
		case err == nil:
			answer(http.StatusOK, h)
		case errors.Is(err, notFound):
			answer(http.StatusNotFound, map[string]string{"error": err.Error() + ": " + id})
		default:
			eid := reply.ErrorID()
			log.Error("reading a history", param, id, "err", err, "error_id", eid)
			answer(http.StatusInternalServerError, map[string]string{"error": "internal error", "error_id": eid})
		}
	}
}
