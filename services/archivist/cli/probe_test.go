package cli

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbe: 200s pass; a 503 fails naming the URL; a 401 passes only
// with --key-optional and no key; an https URL is checked against --ca;
// the key goes as a bearer token.
func TestProbe(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/notready", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "NATS: no answer", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/cdx", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, "no key", http.StatusUnauthorized)
		}
	})
	plain := httptest.NewServer(mux)
	defer plain.Close()
	secure := httptest.NewTLSServer(mux)
	defer secure.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(o probeOptions, urls ...string) (string, error) {
		o.timeout = 5 * time.Second
		var out strings.Builder
		err := probe(ctx, o, urls, &out)
		return out.String(), err
	}
	if out, err := run(probeOptions{ca: ca}, plain.URL+"/readyz", secure.URL+"/readyz"); err != nil {
		t.Errorf("two ready services: %v\n%s", err, out)
	}
	if _, err := run(probeOptions{}, secure.URL+"/readyz"); err == nil {
		t.Error("an https URL was taken without its CA")
	}
	out, err := run(probeOptions{}, plain.URL+"/readyz", plain.URL+"/notready")
	if err == nil || !strings.Contains(err.Error(), "/notready") || !strings.Contains(out, "NATS: no answer") {
		t.Errorf("a service not ready: %v\n%s", err, out)
	}
	if _, err := run(probeOptions{}, plain.URL+"/cdx"); err == nil {
		t.Error("a 401 passed without --key-optional")
	}
	if out, err := run(probeOptions{keyOptional: true}, plain.URL+"/cdx"); err != nil || !strings.Contains(out, "401 without a key") {
		t.Errorf("a 401 without a key, --key-optional: %v\n%s", err, out)
	}
	if _, err := run(probeOptions{keyOptional: true, token: "wrong"}, plain.URL+"/cdx"); err == nil {
		t.Error("a 401 with a (wrong) key passed")
	}
	if out, err := run(probeOptions{token: "k1"}, plain.URL+"/cdx"); err != nil {
		t.Errorf("the right key: %v\n%s", err, out)
	}
}
