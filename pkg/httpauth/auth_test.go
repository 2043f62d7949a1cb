package httpauth

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestKeysFileIsStrictAndReloaded: a keys file names each key's holder,
// roles and hash (and a publisher's source); a malformed line is refused
// naming it; a key deleted from the file is refused once the file changed
// (revocation without a restart), and a new one accepted.
func TestKeysFileIsStrictAndReloaded(t *testing.T) {
	// A publisher's line names the collections it deposits into, in either
	// order with its source; NewKey writes them.
	_, line := apiauth.NewKey("tv", []apiauth.Role{apiauth.Publisher}, "tv", "tv-news", "tv-drama")
	keys, err := apiauth.ParseKeys(line)
	if err != nil || len(keys) != 1 || keys[0].Source != "tv" || strings.Join(keys[0].Collections, " ") != "tv-news tv-drama" {
		t.Fatalf("%q: %+v %v", line, keys, err)
	}
	if !keys[0].MayDeposit("tv-news") || keys[0].MayDeposit("radio") || !keys[0].OwnOnly() {
		t.Errorf("%+v: may deposit into tv-news only, and reads only its own", keys[0].Identity)
	}
	keys, err = apiauth.ParseKeys("all publisher,operator " + strings.Repeat("0", 64) + " collections=* source=ops")
	if err != nil || !keys[0].MayDeposit("radio") || keys[0].OwnOnly() {
		t.Errorf("an operator depositing everywhere: %+v %v", keys, err)
	}
	if none := (apiauth.Identity{Name: "x", Roles: []apiauth.Role{apiauth.Publisher}, Source: "x"}); none.MayDeposit("x") {
		t.Error("a publisher with no collections may deposit")
	}

	for line, want := range map[string]string{
		"a reader":                               "want NAME ROLES SHA256",
		"a king " + strings.Repeat("0", 64):      `unknown role "king"`,
		"a reader abc":                           "64 hex digits",
		"a publisher " + strings.Repeat("0", 64): "bound to its source",
		"a publisher " + strings.Repeat("0", 64) + " source=Bad Source":               "source",
		"a publisher " + strings.Repeat("0", 64) + " source=a collections=b arks=* x": "want NAME ROLES SHA256",
		"a publisher " + strings.Repeat("0", 64) + " source=-x":                       "source",
		"a publisher " + strings.Repeat("0", 64) + " source=a source=b":               "each once",
		"a publisher " + strings.Repeat("0", 64) + " source=a owner=b":                "each once",
		"a publisher " + strings.Repeat("0", 64) + " source=a collections=ok,Not/Ok":  "collections",
		"a reader " + strings.Repeat("0", 64) + " collections=tv":                     "no publisher role",
	} {
		if _, err := apiauth.ParseKeys(line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", line, err, want)
		}
	}
	ops, opsLine := apiauth.NewKey("ops", []apiauth.Role{apiauth.Operator}, "")
	pub, pubLine := apiauth.NewKey("radio", []apiauth.Role{apiauth.Publisher}, "radio")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# keys\n"+opsLine+"\n"+pubLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(testRoutes())
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
	pub2, pub2Line := apiauth.NewKey("radio", []apiauth.Role{apiauth.Publisher}, "radio")
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
	if _, err := New(Config{Mode: "keys"}); err == nil || !strings.Contains(err.Error(), "API_KEYS_FILE") {
		t.Errorf("keys without a file: %v, want an error naming API_KEYS_FILE", err)
	}
}

// testRoutes is an API of a publisher route that answers with its caller's
// name and source (POST /v1/records), a read (GET /v1/status) and an
// operator's action (POST /v1/admin).
func testRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/records", func(w http.ResponseWriter, r *http.Request) {
		id, _ := apiauth.Caller(r.Context())
		w.Write([]byte(id.Name + " " + id.Source))
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/admin", func(w http.ResponseWriter, r *http.Request) {})
	return PublisherRoutes(mux, "POST /v1/records")
}

// TestBrowserSessions: a Browser handler sends a person without a key to
// its login page; a known key signs in (an HttpOnly, SameSite=Strict
// cookie), an unknown one is refused there; the cookie reads (GET) and the
// handler sees the credential to ask other APIs with, but it never
// authorises a POST; a redirect after sign-in stays on the site; sign-out
// forgets the cookie. An API that is not a Browser handler ignores it.
func TestBrowserSessions(t *testing.T) {
	reader, readerLine := apiauth.NewKey("viewer", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(readerLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		id, _ := apiauth.Caller(r.Context())
		w.Write([]byte(id.Name + " " + apiauth.Credential(r.Context())))
	})
	mux.HandleFunc("POST /act", func(w http.ResponseWriter, r *http.Request) {})
	h := a.Wrap(Browser(mux))
	do := func(method, path, body string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do("GET", "/item?x=1", "", map[string]string{"Accept": "text/html"}); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/login?next=%2Fitem%3Fx%3D1" {
		t.Errorf("a page without a key: %d %q, want 303 to the login page", rec.Code, rec.Header().Get("Location"))
	}
	if rec := do("GET", "/panels", "", nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("a fragment without a key: %d, want 401", rec.Code)
	}
	if rec := do("GET", "/login", "", nil); rec.Code != 200 || !strings.Contains(rec.Body.String(), `name="key"`) {
		t.Errorf("login page: %d %s", rec.Code, rec.Body)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if rec := do("POST", "/login", "key=ak_nope&next=/", form); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "not known") || len(rec.Result().Cookies()) != 0 {
		t.Errorf("unknown key: %d %s", rec.Code, rec.Body)
	}
	rec := do("POST", "/login", "key="+reader+"&next=//evil.example/", form)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" || len(cookies) != 1 {
		t.Fatalf("sign in: %d %q %v", rec.Code, rec.Header().Get("Location"), cookies)
	}
	// Browsers drop a tab from a URL: "/\t/evil.example" is
	// "//evil.example", and the sign-in used to send there.
	for _, next := range []string{"/%09/evil.example", "/%0a/evil.example", "/%5C/evil.example", "/%20/evil.example", "https://evil.example/"} {
		rec := do("POST", "/login", "key="+reader+"&next="+next, form)
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || loc != "/" {
			t.Errorf("sign in with next=%s: %d to %q, want / (never off the site)", next, rec.Code, loc)
		}
	}
	if rec := do("POST", "/login", "key="+reader+"&next=/item%3Fx%3D1", form); rec.Header().Get("Location") != "/item?x=1" {
		t.Errorf("sign in with a path of the site: to %q, want /item?x=1", rec.Header().Get("Location"))
	}
	// The cookie holds a random session id, never the key: a stolen
	// cookie is not the key, and signing out ends it on the server.
	c := cookies[0]
	if c.Name != SessionCookie || c.Value == reader || strings.Contains(c.Value, reader) || len(c.Value) < 40 || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie: %+v", c)
	}
	withCookie := map[string]string{"Cookie": SessionCookie + "=" + c.Value}
	if rec := do("GET", "/", "", map[string]string{"Cookie": SessionCookie + "=" + reader}); rec.Code != http.StatusUnauthorized {
		t.Errorf("the key itself as the cookie: %d, want 401", rec.Code)
	}
	if rec := do("GET", "/", "", withCookie); rec.Code != 200 || rec.Body.String() != "viewer "+reader {
		t.Errorf("reading with the cookie: %d %q", rec.Code, rec.Body)
	}
	if rec := do("POST", "/act", "", withCookie); rec.Code != http.StatusUnauthorized {
		t.Errorf("a POST with only the cookie: %d, want 401", rec.Code)
	}
	if rec := do("POST", "/logout", "", withCookie); rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 || rec.Result().Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign out: %d %v", rec.Code, rec.Result().Cookies())
	}
	// Signed out on the server: the old cookie, replayed, reads nothing.
	if rec := do("GET", "/", "", withCookie); rec.Code != http.StatusUnauthorized {
		t.Errorf("the cookie after sign-out: %d, want 401", rec.Code)
	}
	// A key revoked in the keys file ends its sessions.
	rec = do("POST", "/login", "key="+reader+"&next=/", form)
	again := map[string]string{"Cookie": SessionCookie + "=" + rec.Result().Cookies()[0].Value}
	if rec := do("GET", "/", "", again); rec.Code != 200 {
		t.Fatalf("a new session: %d", rec.Code)
	}
	if err := os.WriteFile(file, []byte("# revoked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.checked = time.Time{}
	a.mu.Unlock()
	if rec := do("GET", "/", "", again); rec.Code != http.StatusUnauthorized {
		t.Errorf("a session of a revoked key: %d, want 401", rec.Code)
	}
	// An API (no Browser) takes no cookie and has no login page.
	api := a.Wrap(testRoutes())
	req := httptest.NewRequest("GET", "/v1/status", nil)
	req.Header.Set("Cookie", c.String())
	rec = httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("an API with the cookie: %d, want 401", rec.Code)
	}
}

// TestBrokenKeysFileIsReported: a keys file that failed to parse on reload
// was ignored without a line, so a revocation made in that edit silently
// did not apply. Now the keys as they were stay in force (a broken edit
// locks no one out) and the failure is logged, counted and fails readiness
// until the file is fixed; the fixed file then applies the revocation.
func TestBrokenKeysFileIsReported(t *testing.T) {
	ops, opsLine := apiauth.NewKey("ops", []apiauth.Role{apiauth.Operator}, "")
	pub, pubLine := apiauth.NewKey("radio", []apiauth.Role{apiauth.Publisher}, "radio")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(opsLine+"\n"+pubLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	var mu sync.Mutex
	a.Log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	a.ReloadFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "test_reload_failures_total"})
	recheck := func() {
		a.mu.Lock()
		a.checked = time.Time{}
		a.mu.Unlock()
	}
	if err := a.KeysHealth(context.Background()); err != nil {
		t.Fatalf("a good file: %v", err)
	}
	// An edit that revokes radio and breaks a line.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(file, []byte(opsLine+"\nradio publisher not-a-hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recheck()
	err = a.KeysHealth(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot be loaded") {
		t.Errorf("readiness with a broken keys file: %v", err)
	}
	if _, ok := a.lookup(ops); !ok {
		t.Error("the operator's key stopped working with a broken edit")
	}
	mu.Lock()
	line := logged.String()
	mu.Unlock()
	if !strings.Contains(line, "cannot be loaded") || !strings.Contains(line, "revocation") {
		t.Errorf("logged %q, want the failed reload said", line)
	}
	if n := testutil.ToFloat64(a.ReloadFailures); n != 1 {
		t.Errorf("%v failed reloads counted, want 1", n)
	}
	// Fixed: the revocation applies, readiness is back.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(file, []byte(opsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recheck()
	if err := a.KeysHealth(context.Background()); err != nil {
		t.Errorf("readiness once fixed: %v", err)
	}
	if _, ok := a.lookup(pub); ok {
		t.Error("the revoked key still works once the file is fixed")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestSignInIsThisSitesAlone (N35): a sign-in or sign-out posted from
// another site's page (its Origin, or the browser's Sec-Fetch-Site) is
// refused: no login CSRF; sign-in attempts are rated per client address;
// one key signing in more times than the server keeps sessions signs
// no one else out.
func TestSignInIsThisSitesAlone(t *testing.T) {
	reader, readerLine := apiauth.NewKey("viewer", []apiauth.Role{apiauth.Reader}, "")
	other, otherLine := apiauth.NewKey("other", []apiauth.Role{apiauth.Reader}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(readerLine+"\n"+otherLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mode: "keys", KeysFile: file, RateLimit: 5, RateBurst: 5})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {})
	h := a.Wrap(Browser(mux))
	post := func(path, key, addr string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://dash.example"+path, strings.NewReader("key="+key+"&next=/"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, hdr := range []map[string]string{{"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}} {
		for _, path := range []string{"/login", "/logout"} {
			if rec := post(path, reader, "10.0.0.1:1", hdr); rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
				t.Errorf("POST %s with %v: %d, want 403 and no cookie", path, hdr, rec.Code)
			}
		}
	}
	if rec := post("/login", reader, "10.0.0.2:1", map[string]string{"Origin": "http://dash.example", "Sec-Fetch-Site": "same-origin"}); rec.Code != http.StatusSeeOther {
		t.Errorf("a sign-in from the site's own page: %d", rec.Code)
	}
	// The rate: attempts from one address beyond the burst wait.
	limited := false
	for range 20 {
		if rec := post("/login", "ak_guess", "10.0.0.3:1", nil); rec.Code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Error("20 sign-in attempts from one address at once were all answered")
	}
	// One key signing in beyond the server's sessions signs no one out.
	otherSession := a.sessions.open(other)
	for range maxSessions + 10 {
		a.sessions.open(reader)
	}
	if _, ok := a.sessions.key(otherSession); !ok {
		t.Error("another key's session was evicted by one key's sign-ins")
	}
}

// TestOpenRoutesNeedNoKey: a route marked Open is served without a key,
// to the caller apiauth.Public (no role), and with a key to its holder,
// whatever the roles; a wrong key is still refused; every other route
// still needs its key.
func TestOpenRoutesNeedNoKey(t *testing.T) {
	pub, pubLine := apiauth.NewKey("radio", []apiauth.Role{apiauth.Publisher}, "radio")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(pubLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mode: "keys", KeysFile: file})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{point}/cdx", func(w http.ResponseWriter, r *http.Request) {
		id, _ := apiauth.Caller(r.Context())
		w.Write([]byte(id.Name))
	})
	mux.HandleFunc("GET /cdx", func(w http.ResponseWriter, r *http.Request) {})
	h := a.Wrap(RoutesOf(mux).Open("GET /{point}/cdx"))
	for _, c := range []struct {
		key, path string
		code      int
		body      string
	}{
		{"", "/public/cdx", 200, "public"},
		{pub, "/public/cdx", 200, "radio"},
		{"not-a-key", "/public/cdx", 401, ""},
		{"", "/cdx", 401, ""},
		{pub, "/cdx", 403, ""},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || (c.body != "" && rec.Body.String() != c.body) {
			t.Errorf("%s with key %q: %d %q, want %d %q", c.path, c.key, rec.Code, rec.Body.String(), c.code, c.body)
		}
	}
	if apiauth.Public.Has(apiauth.Reader) || apiauth.Public.Has(apiauth.Publisher) || apiauth.Public.Has(apiauth.Operator) {
		t.Error("the public caller has a role")
	}
}
