// Package httpauth is who may call the APIs, and how much: bearer keys from
// a keys file (reloaded when it changes), OIDC tokens, the routes' roles,
// the browser's sign-in sessions, and each caller's request rate.
package httpauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/prometheus/client_golang/prometheus"
)

// Config says how the APIs authenticate their callers.
type Config struct {
	// Mode is "keys" (every API request carries a key listed in KeysFile)
	// or "off" (no authentication: for tests and a private development
	// machine only; the service logs a warning).
	Mode string `env:"API_AUTH, default=keys"`
	// KeysFile lists the API keys, hashed (see ParseKeys); it is read
	// again when it changes, so a key is issued or revoked by editing it.
	KeysFile string `env:"API_KEYS_FILE"`
	// JWT, when its issuer is set, also accepts bearer JWTs of an OIDC
	// provider, beside the keys.
	JWT JWTConfig
	// RateLimit bounds each caller's requests a second (per key or token
	// subject; 0: unbounded); a caller over it gets 429 with Retry-After.
	RateLimit float64 `env:"API_RATE_LIMIT, default=50"`
	// RateBurst is how many requests a caller may send at once beyond the
	// rate.
	RateBurst int `env:"API_RATE_BURST, default=200"`
	// AllowedHosts, when set, are the host names a request's Host may name
	// (comma-separated; the port is not compared): any other is refused
	// before authentication, so that a page of another site whose name
	// resolves to this machine (DNS rebinding) reaches no API.
	AllowedHosts []string `env:"API_ALLOWED_HOSTS"`
}

// JWTConfig says which bearer JWTs (access or ID tokens of an OIDC
// provider: Keycloak, Dex, a cloud's identity service) the APIs accept, and
// where a token's roles and source are.
type JWTConfig struct {
	// Issuer is the tokens' iss; set, JWTs are accepted.
	Issuer string `env:"API_JWT_ISSUER"`
	// JWKSURL is where the issuer publishes its signing keys (fetched when
	// a token names a key not yet seen, and cached).
	JWKSURL string `env:"API_JWT_JWKS_URL"`
	// Audience is the aud a token must name (this deployment's client id).
	Audience string `env:"API_JWT_AUDIENCE"`
	// RolesClaim is the claim holding the caller's roles (a list, or a
	// space-separated string): reader, publisher, operator; others ignored.
	RolesClaim string `env:"API_JWT_ROLES_CLAIM, default=archivist_roles"`
	// SourceClaim is the claim holding a publisher's source.
	SourceClaim string `env:"API_JWT_SOURCE_CLAIM, default=archivist_source"`
	// CollectionsClaim is the claim holding the collections a publisher may
	// deposit batches into (a list, or a space- or comma-separated string;
	// "*" is every one).
	CollectionsClaim string `env:"API_JWT_COLLECTIONS_CLAIM, default=archivist_collections"`
	// ARKsClaim is the claim holding the shoulders or NAANs under which a
	// publisher may supply ARKs of new objects (a list, or a space- or
	// comma-separated string; "*" is any NAAN but the archive's own
	// shoulder).
	ARKsClaim string `env:"API_JWT_ARKS_CLAIM, default=archivist_arks"`
}

// Routes are a ServeMux's routes with the roles each needs. By default a
// GET or HEAD needs the reader role (staff: readers and operators) and any
// other method the operator role; Publisher and Operator mark the
// exceptions.
type Routes struct {
	mux       *http.ServeMux
	publisher map[string]bool
	operator  map[string]bool
	depositor map[string]bool
	open      map[string]bool
}

// RoutesOf returns mux's routes with the default roles.
func RoutesOf(mux *http.ServeMux) Routes {
	return Routes{mux: mux, publisher: map[string]bool{}, operator: map[string]bool{}, depositor: map[string]bool{}, open: map[string]bool{}}
}

// PublisherRoutes marks the routes of mux (by pattern, as registered) that
// a publisher may call: curation records and batch submissions, and the
// reads a handler scopes to the caller's own (Identity.OwnOnly). Every
// other route needs the reader role for GET and HEAD and the operator role
// for any other method.
func PublisherRoutes(mux *http.ServeMux, patterns ...string) Routes {
	return RoutesOf(mux).Publisher(patterns...)
}

// Publisher marks routes a publisher may call. A marked GET or HEAD is
// also staff's (reader or operator); any other marked method is the
// publisher's only.
func (rt Routes) Publisher(patterns ...string) Routes {
	for _, p := range patterns {
		rt.publisher[p] = true
	}
	return rt
}

// Operator marks routes only an operator may call, reads included: what
// is for the archive's staff who act, not for every reader (a Wayback's
// key reads the index, not the collections' callback tokens).
func (rt Routes) Operator(patterns ...string) Routes {
	for _, p := range patterns {
		rt.operator[p] = true
	}
	return rt
}

// Depositor marks routes an operator may call on anyone's work and a
// publisher on its own (the handler scopes it): acting on work (pkg/work).
// A marked GET or HEAD is also a reader's.
func (rt Routes) Depositor(patterns ...string) Routes {
	for _, p := range patterns {
		rt.depositor[p] = true
	}
	return rt
}

// Open marks routes anyone may call, with a key or without one (a
// Wayback front end's public access point): the handler applies its own
// rules (apiauth.Public is the caller without a key).
func (rt Routes) Open(patterns ...string) Routes {
	for _, p := range patterns {
		rt.open[p] = true
	}
	return rt
}

// isOpen reports whether r is to an Open route of h.
func isOpen(h http.Handler, r *http.Request) bool {
	rt, ok := h.(Routes)
	if !ok {
		return false
	}
	_, pattern := rt.mux.Handler(r)
	return rt.open[pattern]
}

// ServeHTTP serves the request with the ServeMux.
func (rt Routes) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.mux.ServeHTTP(w, r) }

// Allowed reports whether id may make request r to h (Routes, or another
// handler with the default roles), and if not, the role it would need: what
// the API's authentication checks before h serves r.
func Allowed(id apiauth.Identity, h http.Handler, r *http.Request) (bool, apiauth.Role) {
	return allowed(id, h, r)
}

// allowed reports whether id may make request r to h, and if not, the
// role it would need.
func allowed(id apiauth.Identity, h http.Handler, r *http.Request) (bool, apiauth.Role) {
	if b, ok := h.(browser); ok {
		h = b.Handler
	}
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if rt, ok := h.(Routes); ok {
		_, pattern := rt.mux.Handler(r)
		switch {
		case rt.open[pattern]:
			return true, ""
		case rt.operator[pattern]:
			return id.Has(apiauth.Operator), apiauth.Operator
		case rt.depositor[pattern]:
			return id.Has(apiauth.Operator) || id.Has(apiauth.Publisher) || (read && id.Has(apiauth.Reader)), apiauth.Operator
		case rt.publisher[pattern] && read:
			return id.Has(apiauth.Reader) || id.Has(apiauth.Publisher), apiauth.Publisher
		case rt.publisher[pattern]:
			return id.Has(apiauth.Publisher), apiauth.Publisher
		}
	}
	if read {
		return id.Has(apiauth.Reader), apiauth.Reader
	}
	return id.Has(apiauth.Operator), apiauth.Operator
}

// writeAuthError refuses a request, and closes its connection: a client
// that is not (or not yet) allowed holds no keep-alive connection open, so
// idle connections cannot shut others out of the API.
func writeAuthError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="archivist"`)
	}
	reply.Error(w, code, msg)
}

// Authenticator checks bearer keys against the keys file, reading it again
// when it changes (checked at most every few seconds).
type Authenticator struct {
	cfg     Config
	jwt     *jwtVerifier // nil unless API_JWT_ISSUER is set
	mu      sync.Mutex
	keys    map[string]apiauth.Identity // by hash
	mod     time.Time                   // the file's modification time and size when read
	size    int64
	checked time.Time
	// reloadErr is why the file as it now is could not be loaded (nil when
	// it was): the keys as they were stay in force, so a revocation made in
	// that edit does not apply until the file is fixed.
	reloadErr error
	// Log and ReloadFailures report a failed reload (nil: not reported).
	Log            *slog.Logger
	ReloadFailures prometheus.Counter
	// sessions are the signed-in people of a Browser handler.
	sessions sessions
	// limits bound each caller's request rate.
	limits *RateLimits
}

// New checks cfg and reads the keys file it names.
func New(cfg Config) (*Authenticator, error) {
	switch cfg.Mode {
	case "off":
		return &Authenticator{cfg: cfg}, nil
	case "keys", "":
		a := &Authenticator{cfg: cfg, limits: NewRateLimits(cfg.RateLimit, cfg.RateBurst)}
		if cfg.JWT.Issuer != "" {
			v, err := newJWTVerifier(cfg.JWT)
			if err != nil {
				return nil, err
			}
			a.jwt = v
		}
		if cfg.KeysFile == "" {
			if a.jwt != nil {
				return a, nil
			}
			return nil, errors.New("API_AUTH=keys needs API_KEYS_FILE, the file of API keys, or API_JWT_ISSUER (or API_AUTH=off on a private development machine)")
		}
		if err := a.load(); err != nil {
			return nil, err
		}
		return a, nil
	default:
		return nil, fmt.Errorf("API_AUTH is %q: keys or off", cfg.Mode)
	}
}

func (a *Authenticator) load() error {
	st, err := os.Stat(a.cfg.KeysFile)
	if err != nil {
		return fmt.Errorf("API_KEYS_FILE: %w", err)
	}
	b, err := os.ReadFile(a.cfg.KeysFile)
	if err != nil {
		return fmt.Errorf("API_KEYS_FILE: %w", err)
	}
	keys, err := apiauth.ParseKeys(string(b))
	if err != nil {
		return fmt.Errorf("API_KEYS_FILE %s: %w", a.cfg.KeysFile, err)
	}
	m := make(map[string]apiauth.Identity, len(keys))
	for _, k := range keys {
		m[k.Hash] = k.Identity
	}
	a.keys, a.mod, a.size = m, st.ModTime(), st.Size()
	return nil
}

// lookup finds the identity of a presented key, reloading a changed file.
func (a *Authenticator) lookup(key string) (apiauth.Identity, bool) {
	if a.cfg.KeysFile == "" {
		return apiauth.Identity{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reloadIfChanged()
	id, ok := a.keys[apiauth.HashKey(key)]
	return id, ok
}

// reloadIfChanged reads the keys file again if it changed (looking at most
// every 2 s). A file that cannot be loaded keeps the keys it had, and says
// so: logged, counted (archivist_api_keys_reload_failures_total) and kept
// for readiness (KeysHealth) until a load succeeds. a.mu is held.
func (a *Authenticator) reloadIfChanged() {
	if time.Since(a.checked) <= 2*time.Second {
		return
	}
	a.checked = time.Now()
	st, err := os.Stat(a.cfg.KeysFile)
	if err == nil && st.ModTime().Equal(a.mod) && st.Size() == a.size {
		return
	}
	if err == nil {
		err = a.load()
	} else {
		err = fmt.Errorf("API_KEYS_FILE: %w", err)
	}
	if err == nil {
		if a.reloadErr != nil && a.Log != nil {
			a.Log.Info("API keys file loaded again", "file", a.cfg.KeysFile, "keys", len(a.keys))
		}
		a.reloadErr = nil
		return
	}
	if a.reloadErr == nil || a.reloadErr.Error() != err.Error() {
		if a.Log != nil {
			a.Log.Error("API keys file changed but cannot be loaded: the keys as they were stay in force, and a revocation in the change does not apply until it is fixed",
				"file", a.cfg.KeysFile, "err", err)
		}
		if a.ReloadFailures != nil {
			a.ReloadFailures.Inc()
		}
	}
	a.reloadErr = err
}

// KeysHealth is the readiness of the keys file: an error while the file as
// it now is cannot be loaded.
func (a *Authenticator) KeysHealth(context.Context) error {
	if a.cfg.KeysFile == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reloadIfChanged()
	if a.reloadErr != nil {
		return fmt.Errorf("the API keys file changed and cannot be loaded (the previous keys stay in force): %w", a.reloadErr)
	}
	return nil
}

// Wrap authenticates every request to h: 401 without a known key, 403
// without the role the request needs (allowed). A Browser handler's
// login page is served without a key, and its readers may carry their key
// in the session cookie instead of the Authorization header.
func (a *Authenticator) Wrap(h http.Handler) http.Handler {
	_, isBrowser := h.(browser)
	if a.cfg.Mode == "off" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !a.hostAllowed(r.Host) {
				writeAuthError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this API does not serve host %q (API_ALLOWED_HOSTS)", r.Host))
				return
			}
			h.ServeHTTP(w, r.WithContext(apiauth.WithCaller(r.Context(), apiauth.Anonymous)))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostAllowed(r.Host) {
			writeAuthError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this API does not serve host %q (API_ALLOWED_HOSTS)", r.Host))
			return
		}
		if isBrowser && (r.URL.Path == loginPath || r.URL.Path == logoutPath) {
			a.login(w, r)
			return
		}
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if (!ok || key == "") && isBrowser && (safeMethod(r) || sameSiteForm(r)) {
			if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
				key, ok = a.sessions.key(c.Value)
			}
		}
		if (!ok || key == "") && isOpen(h, r) {
			h.ServeHTTP(w, r.WithContext(apiauth.WithCaller(r.Context(), apiauth.Public)))
			return
		}
		if !ok || key == "" {
			if isBrowser && safeMethod(r) && strings.Contains(r.Header.Get("Accept"), "text/html") {
				http.Redirect(w, r, loginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			writeAuthError(w, http.StatusUnauthorized, "an API key is needed: Authorization: Bearer KEY")
			return
		}
		key = strings.TrimSpace(key)
		id, err := a.identify(r.Context(), key)
		if err != nil {
			writeAuthError(w, http.StatusUnauthorized, err.Error())
			return
		}
		if ok, wait := a.limits.Allow(id.Name); !ok {
			writeTooMany(w, id.Name, wait)
			return
		}
		if ok, role := allowed(id, h, r); !ok {
			writeAuthError(w, http.StatusForbidden, fmt.Sprintf("%s %s needs the %s role; %q has %v", r.Method, r.URL.Path, role, id.Name, id.Roles))
			return
		}
		ctx := apiauth.WithCredential(apiauth.WithCaller(r.Context(), id), key)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sameSiteForm reports whether an unsafe request comes from this site's own
// page, as a browser says (its Origin, or Sec-Fetch-Site: same-origin): a
// page's form acts with the person's session (the console's actions), a
// request another site makes, or one that says nothing, does not.
func sameSiteForm(r *http.Request) bool {
	return (r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") == "same-origin") && crossSite(r) == ""
}

// hostAllowed reports whether a request's Host names one of
// API_ALLOWED_HOSTS (any, when it is empty).
func (a *Authenticator) hostAllowed(host string) bool {
	if len(a.cfg.AllowedHosts) == 0 {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(strings.ToLower(name), "[]")
	for _, allowed := range a.cfg.AllowedHosts {
		if strings.Trim(strings.ToLower(strings.TrimSpace(allowed)), "[]") == name {
			return true
		}
	}
	return false
}

// identify finds the identity of a presented key or JWT.
func (a *Authenticator) identify(ctx context.Context, key string) (apiauth.Identity, error) {
	if a.jwt != nil && looksLikeJWT(key) {
		id, err := a.jwt.verify(ctx, key)
		if err != nil {
			return apiauth.Identity{}, fmt.Errorf("token refused: %w", err)
		}
		return id, nil
	}
	if id, ok := a.lookup(key); ok {
		return id, nil
	}
	return apiauth.Identity{}, errors.New("unknown API key")
}

func safeMethod(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}
