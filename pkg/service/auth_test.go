package service

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeysFileIsStrictAndReloaded: a keys file names each key's holder,
// roles and hash (and a publisher's source); a malformed line is refused
// naming it; a key deleted from the file is refused once the file changed
// (revocation without a restart), and a new one accepted.
func TestKeysFileIsStrictAndReloaded(t *testing.T) {
	for line, want := range map[string]string{
		"a reader":                               "want NAME ROLES SHA256",
		"a king " + strings.Repeat("0", 64):      `unknown role "king"`,
		"a reader abc":                           "64 hex digits",
		"a publisher " + strings.Repeat("0", 64): "bound to its source",
		"a publisher " + strings.Repeat("0", 64) + " source=Bad Source": "want NAME ROLES SHA256",
		"a publisher " + strings.Repeat("0", 64) + " source=-x":         "source",
	} {
		if _, err := ParseKeys(line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", line, err, want)
		}
	}
	ops, opsLine := NewKey("ops", []Role{Operator}, "")
	pub, pubLine := NewKey("radio", []Role{Publisher}, "radio")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# keys\n"+opsLine+"\n"+pubLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := newAuthenticator(AuthConfig{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	h := a.wrap(testRoutes())
	do := func(key, path string) (int, string) {
		req := httptest.NewRequest("POST", path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := do(pub, "/v1/records"); code != 200 || body != "radio radio" {
		t.Errorf("publisher on its route: %d %q", code, body)
	}
	if code, _ := do(pub, "/v1/admin"); code != http.StatusForbidden {
		t.Errorf("publisher on an operator route: %d, want 403", code)
	}
	if code, _ := do(ops, "/v1/records"); code != http.StatusForbidden {
		t.Errorf("operator on a publisher route: %d, want 403", code)
	}
	if code, _ := do("", "/v1/admin"); code != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", code)
	}
	// Revoke radio, issue a new key: no restart.
	pub2, pub2Line := NewKey("radio", []Role{Publisher}, "radio")
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(file, []byte(opsLine+"\n"+pub2Line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.checked = time.Time{} // the next request looks at the file again
	a.mu.Unlock()
	if code, _ := do(pub, "/v1/records"); code != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", code)
	}
	if code, _ := do(pub2, "/v1/records"); code != 200 {
		t.Errorf("the new key: %d", code)
	}
	if _, err := newAuthenticator(AuthConfig{Mode: "keys"}); err == nil || !strings.Contains(err.Error(), "API_KEYS_FILE") {
		t.Errorf("keys without a file: %v, want an error naming API_KEYS_FILE", err)
	}
}

// testRoutes is an API of a publisher route that answers with its caller's
// name and source (POST /v1/records), a read (GET /v1/status) and an
// operator's action (POST /v1/admin).
func testRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/records", func(w http.ResponseWriter, r *http.Request) {
		id, _ := Caller(r.Context())
		w.Write([]byte(id.Name + " " + id.Source))
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/admin", func(w http.ResponseWriter, r *http.Request) {})
	return PublisherRoutes(mux, "POST /v1/records")
}
