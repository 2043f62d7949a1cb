package reply_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/reply"
)

// TestAnswers: every answer is JSON with its status; an error says what
// is wrong; an internal error's text goes to the log alone, the answer and
// the log line sharing an id an operator can search for.
func TestAnswers(t *testing.T) {
	w := httptest.NewRecorder()
	reply.Error(w, http.StatusBadRequest, "limit: a number")
	var got map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 400 || got["error"] != "limit: a number" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("an error: %d %q %v %s", w.Code, w.Header().Get("Content-Type"), err, w.Body)
	}
	var log bytes.Buffer
	w = httptest.NewRecorder()
	reply.Internal(w, slog.New(slog.NewTextHandler(&log, nil)), errors.New("dial tcp db.internal:5432: password authentication failed"), "list jobs", "batch", 7)
	got = nil
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 500 || got["error"] != "internal error" || len(got["error_id"]) != 16 {
		t.Fatalf("an internal error: %d %v %s", w.Code, err, w.Body)
	}
	if strings.Contains(w.Body.String(), "db.internal") {
		t.Errorf("the answer names the database: %s", w.Body)
	}
	if l := log.String(); !strings.Contains(l, "error_id="+got["error_id"]) || !strings.Contains(l, "db.internal") || !strings.Contains(l, "batch=7") {
		t.Errorf("the log line: %s", l)
	}
	if reply.ErrorID() == reply.ErrorID() {
		t.Error("two error ids alike")
	}
}
