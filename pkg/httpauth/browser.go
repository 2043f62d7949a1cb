package httpauth

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// SessionCookie holds the session a person signed in to on a Browser
// handler's login page: a random id, never the key (or OIDC token), which
// stays on the server. It is HttpOnly and SameSite=Strict, and it is
// accepted for GET and HEAD only: with it a page reads, and a page of
// another site can make it do nothing.
const SessionCookie = "archivist_session"

// maxSessions bounds the sessions a server keeps (the oldest goes first),
// and maxSessionsPerKey those of one key (its own oldest goes first): one
// key signing in ten thousand times signs no one else out.
const (
	maxSessions       = 10000
	maxSessionsPerKey = 32
)

// sessions are a Browser handler's signed-in people: by random id, the key
// each signed in with, until it expires. Signing out deletes one; a key
// revoked in the keys file (or a token expired) ends its sessions at their
// next request, since the key is checked again each time. Kept in memory:
// a restart signs everyone out.
type sessions struct {
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	key     string
	expires time.Time
}

// open makes a session for key and returns its id.
func (s *sessions) open(key string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]session{}
	}
	mine, oldestMine, at := 0, "", now.Add(sessionFor)
	for sid, se := range s.byID {
		if se.key == key {
			mine++
			if se.expires.Before(at) {
				oldestMine, at = sid, se.expires
			}
		}
	}
	if mine >= maxSessionsPerKey {
		delete(s.byID, oldestMine)
	}
	if len(s.byID) >= maxSessions {
		oldest, at := "", now.Add(sessionFor)
		for sid, se := range s.byID {
			if se.expires.Before(now) {
				delete(s.byID, sid)
			} else if se.expires.Before(at) {
				oldest, at = sid, se.expires
			}
		}
		if len(s.byID) >= maxSessions {
			delete(s.byID, oldest)
		}
	}
	s.byID[id] = session{key: key, expires: now.Add(sessionFor)}
	return id
}

// key is the key of session id, if it is open.
func (s *sessions) key(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.byID[id]
	if !ok {
		return "", false
	}
	if time.Now().After(se.expires) {
		delete(s.byID, id)
		return "", false
	}
	return se.key, true
}

// close ends session id.
func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sessionFor is how long a sign-in lasts.
const sessionFor = 12 * time.Hour

const (
	loginPath  = "/login"
	logoutPath = "/logout"
	// maxLoginForm bounds a sign-in form's body.
	maxLoginForm = 8 << 10
)

// Browser marks h as pages for people (the dashboard): authenticated as
// every API is, with the same keys and tokens, but a person signs in once on
// its login page (GET /login; POST /login with the form field "key"), which
// opens a server-side session (SessionCookie holds its id); POST /logout
// ends it. A GET asking for
// HTML without a key is sent to the login page rather than answered 401.
func Browser(h http.Handler) http.Handler { return browser{h} }

type browser struct{ http.Handler }

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Archivist: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style nonce="{{.Nonce}}">
body{font:15px/1.4 system-ui,sans-serif;background:#f4f5f7;color:#1d2330;display:flex;justify-content:center;margin-top:12vh}
form{background:#fff;padding:2em 2.4em;border-radius:8px;box-shadow:0 1px 4px #0002;min-width:22em}
h1{font-size:1.3em;margin:0 0 1em}
input[type=password]{width:100%;box-sizing:border-box;padding:.5em;font:inherit;margin:.3em 0 1em}
button{padding:.5em 1.4em;font:inherit;background:#2856b6;color:#fff;border:0;border-radius:4px;cursor:pointer}
.err{color:#b3261e;margin:0 0 1em}
small{color:#5b6475;display:block;margin-top:1.2em;max-width:22em}
</style></head>
<body><form method="post" action="/login">
<h1>Archivist</h1>
{{if .Error}}<p class="err" id="login-error">{{.Error}}</p>{{end}}
<label for="key">API key or token</label>
<input type="password" id="key" name="key" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit" id="sign-in">Sign in</button>
<small>A key of any role reads these pages (archivist dev wrote yours to .archivist/api.token; archivist key new makes others).</small>
</form></body></html>
`))

// Nonce is a fresh CSP nonce for one response.
func Nonce() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// PageCSP is the Content-Security-Policy of a page whose own <style> and
// <script> elements carry nonce: nothing else runs or styles it (no inline
// script or attribute, no other origin), forms post only to the site, and
// no other site frames it.
func PageCSP(nonce string) string {
	return "default-src 'none'; style-src 'nonce-" + nonce + "'; script-src 'nonce-" + nonce + "'; img-src 'self' data:; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

// login serves the login page, signs in and signs out.
func (a *Authenticator) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	page := func(code int, next, msg string) {
		nonce := Nonce()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", PageCSP(nonce))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		_ = loginPage.Execute(w, struct{ Next, Error, Nonce string }{next, msg, nonce})
	}
	secure := r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
	if r.Method == http.MethodPost {
		// Sign-in and sign-out are this site's forms' alone (login CSRF:
		// another site signing a person in with its own key), and sign-in
		// attempts are rated per client address, as API calls per key.
		if why := crossSite(r); why != "" {
			writeAuthError(w, http.StatusForbidden, "sign-in and sign-out come from this site's own pages: "+why)
			return
		}
		if r.URL.Path == loginPath {
			if ok, wait := a.limits.Allow("sign-in from " + ClientHost(r)); !ok {
				writeTooMany(w, "sign-in from "+ClientHost(r), wait)
				return
			}
		}
	}
	switch {
	case r.URL.Path == logoutPath && r.Method == http.MethodPost:
		if c, err := r.Cookie(SessionCookie); err == nil {
			a.sessions.close(c.Value)
		}
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, loginPath, http.StatusSeeOther)
	case r.URL.Path == loginPath && safeMethod(r):
		page(http.StatusOK, localPath(r.URL.Query().Get("next")), "")
	case r.URL.Path == loginPath && r.Method == http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
		if err := r.ParseForm(); err != nil {
			page(http.StatusBadRequest, "/", "the form could not be read: "+err.Error())
			return
		}
		next, key := localPath(r.PostForm.Get("next")), strings.TrimSpace(r.PostForm.Get("key"))
		if _, err := a.identify(r.Context(), key); err != nil || key == "" {
			page(http.StatusUnauthorized, next, "That key is not known here.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: a.sessions.open(key), Path: "/", MaxAge: int(sessionFor / time.Second),
			HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeAuthError(w, http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": GET or POST")
	}
}

// CrossSite says why r came from another site ("" when it did not): what
// a page's own form checks before it acts (beside the session cookie's
// SameSite=Strict).
func CrossSite(r *http.Request) string { return crossSite(r) }

// crossSite says why r came from another site ("" when it did not): its
// Origin names another host (or is "null"), or, with no Origin, the
// browser says the request crossed sites (Sec-Fetch-Site). A request with
// neither is not a browser's (a form post from a page always has one).
func crossSite(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return "Origin " + strconv.Quote(o) + " is not " + strconv.Quote(r.Host)
		}
		return ""
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
		return ""
	default:
		return "Sec-Fetch-Site is " + strconv.Quote(site)
	}
}

// localPath is next when it is a path of this site, else "/": a sign-in
// never sends a person elsewhere. Browsers drop tabs and line breaks from a
// URL and read a backslash as a slash, so "/\t/evil.example" is
// "//evil.example", another site: a control character, a backslash or a
// space anywhere refuses the path, and what is left must parse as a path
// with no scheme or host.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsFunc(next, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == '\\' }) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}

// Mux is the ServeMux beneath h (itself, the Routes of one, or a Browser
// handler of either): false when there is none.
func Mux(h http.Handler) (*http.ServeMux, bool) {
	switch v := h.(type) {
	case *http.ServeMux:
		return v, true
	case Routes:
		return v.mux, true
	case browser:
		return Mux(v.Handler)
	}
	return nil, false
}
