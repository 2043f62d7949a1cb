package service

import (
	"encoding/json"
	"log/slog"
	"net/http"
)

// WriteJSON answers with v as JSON and status code: the one way every
// API writes an answer.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers code with {"error": msg}: msg says what is wrong with
// the request (a 4xx), in words its caller can act on.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string]string{"error": msg})
}

// WriteInternal answers 500 for err, whose text (which may name hosts,
// tables or credentials) goes only to the log, with an id the answer
// carries too: {"error": "internal error", "error_id": ID}. msg and args
// are the log line's.
func WriteInternal(w http.ResponseWriter, log *slog.Logger, err error, msg string, args ...any) {
	id := ErrorID()
	log.Error(msg, append(args, "err", err, "error_id", id)...)
	WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error", "error_id": id})
}
