// Package reply is the one way every API answers: JSON, an error that says
// what is wrong, an internal error whose text goes only to the log.
package reply

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
)

// JSON answers with v as JSON and status code: the one way every
// API writes an answer.
func JSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers code with {"error": msg}: msg says what is wrong with
// the request (a 4xx), in words its caller can act on.
func Error(w http.ResponseWriter, code int, msg string) {
	JSON(w, code, map[string]string{"error": msg})
}

// Internal answers 500 for err, whose text (which may name hosts,
// tables or credentials) goes only to the log, with an id the answer
// carries too: {"error": "internal error", "error_id": ID}. msg and args
// are the log line's.
func Internal(w http.ResponseWriter, log *slog.Logger, err error, msg string, args ...any) {
	id := ErrorID()
	log.Error(msg, append(args, "err", err, "error_id", id)...)
	JSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error", "error_id": id})
}

// ErrorID is a fresh id for an internal error: given to the client and
// logged, so that an operator finds the one in the other.
func ErrorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
