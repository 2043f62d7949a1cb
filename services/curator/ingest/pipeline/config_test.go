package pipeline

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestEZIDIsAskedOverTLS (N37): EZID's Basic credentials go with every
// request, so an http:// INGEST_EZID_URL is refused at start, but for a
// stand-in on this machine.
func TestEZIDIsAskedOverTLS(t *testing.T) {
	cfg := Config{WorkDir: t.TempDir(), ARKPrefix: "ark:/99999/fk4", EZIDUser: "archivist", EZIDPassword: "secret", Concurrency: 1, MaxClaims: 1}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.EZIDURL = "http://ezid.example.org"
	if _, err := New(cfg, ingest.NewStore(nil), nil, nil, log); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("an http:// EZID: %v, want it refused", err)
	}
}
