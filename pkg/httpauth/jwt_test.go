package httpauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an OIDC issuer of one test: its JWKS served over HTTP,
// tokens signed with its key.
type testIssuer struct {
	t       *testing.T
	url     string
	signer  jose.Signer
	fetches atomic.Int32
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &testIssuer{t: t}
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iss.fetches.Add(1)
		_ = json.NewEncoder(w).Encode(jwks)
	}))
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	if iss.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1")); err != nil {
		t.Fatal(err)
	}
	return iss
}

// TestJWKSFetchesAreBounded: an issuer that does not answer holds a
// request no longer than the fetch's timeout.
func TestJWKSFetchesAreBounded(t *testing.T) {
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer stuck.Close()
	k := &jwksKeys{url: stuck.URL, client: &http.Client{Timeout: 200 * time.Millisecond}, every: time.Minute, algs: []jose.SignatureAlgorithm{jose.RS256}}
	iss := newTestIssuer(t)
	start := time.Now()
	if _, err := k.VerifySignature(context.Background(), iss.token(iss.signer, nil)); err == nil {
		t.Error("verified against keys never fetched")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a stuck issuer held the request %s", d)
	}
}

// token signs claims (iss, aud, sub, exp defaulted to a valid token's).
func (iss *testIssuer) token(signer jose.Signer, extra map[string]any) string {
	iss.t.Helper()
	claims := map[string]any{"iss": "https://idp.example", "aud": "archivist", "sub": "radio-system",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range extra {
		if v == nil {
			delete(claims, k)
			continue
		}
		claims[k] = v
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		iss.t.Fatal(err)
	}
	return raw
}

// TestJWTsOfAnOIDCIssuer: beside the keys file, the APIs accept JWTs of the
// configured issuer: signature, issuer, audience and expiry are checked;
// roles and a publisher's source come from their claims.
func TestJWTsOfAnOIDCIssuer(t *testing.T) {
	iss := newTestIssuer(t)
	ops, opsLine := apiauth.NewKey("ops", []apiauth.Role{apiauth.Operator}, "")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(opsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Mode: "keys", KeysFile: file, JWT: JWTConfig{Issuer: "https://idp.example", JWKSURL: iss.url,
		Audience: "archivist", RolesClaim: "archivist_roles", SourceClaim: "archivist_source", CollectionsClaim: "archivist_collections"}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(testRoutes())
	do := func(method, path, bearer string) (int, string) {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}

	publisher := iss.token(iss.signer, map[string]any{"archivist_roles": []string{"publisher"}, "archivist_source": "radio"})
	// The holder is named in a space of its own (N41): a keys-file name
	// holds no ':', so a subject chosen at the issuer is never a key's
	// depositor.
	if code, body := do("POST", "/v1/records", publisher); code != 200 || body != "oidc:radio-system radio" {
		t.Errorf("a publisher's token on its route: %d %q, want its holder oidc:radio-system", code, body)
	}
	if _, err := apiauth.ParseKeys("oidc:radio-system reader " + strings.Repeat("0", 64)); err == nil {
		t.Error("a keys file names a key oidc:radio-system, a token's holder")
	}
	// The collections a publisher deposits into are a claim.
	for _, c := range []struct {
		claim any
		want  string
	}{{"radio-news, radio-music", "radio-news radio-music"}, {[]string{"radio-news"}, "radio-news"}, {nil, ""}} {
		claim, want := c.claim, c.want
		raw := iss.token(iss.signer, map[string]any{"archivist_roles": []string{"publisher"}, "archivist_source": "radio", "archivist_collections": claim})
		id, err := a.identify(context.Background(), raw)
		if err != nil || strings.Join(id.Collections, " ") != want {
			t.Errorf("collections claim %v: %+v %v, want %q", claim, id, err, want)
		}
	}
	bad := iss.token(iss.signer, map[string]any{"archivist_roles": []string{"publisher"}, "archivist_source": "radio", "archivist_collections": "Radio News"})
	if _, err := a.identify(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "archivist_collections") {
		t.Errorf("a malformed collections claim: %v", err)
	}
	if code, _ := do("POST", "/v1/admin", publisher); code != http.StatusForbidden {
		t.Errorf("a publisher's token on an operator route: %d, want 403", code)
	}
	operator := iss.token(iss.signer, map[string]any{"archivist_roles": "operator reader"})
	if code, _ := do("POST", "/v1/admin", operator); code != 200 {
		t.Errorf("an operator's token (roles as a string): %d", code)
	}
	noRoles := iss.token(iss.signer, nil)
	if code, _ := do("GET", "/v1/status", noRoles); code != http.StatusForbidden {
		t.Errorf("a token without roles: %d, want 403", code)
	}
	if code, _ := do("POST", "/v1/admin", ops); code != 200 {
		t.Errorf("an API key beside the JWTs: %d", code)
	}

	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: otherKey}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"expired":                      iss.token(iss.signer, map[string]any{"archivist_roles": "operator", "exp": time.Now().Add(-time.Minute).Unix()}),
		"another audience":             iss.token(iss.signer, map[string]any{"archivist_roles": "operator", "aud": "someone-else"}),
		"another issuer":               iss.token(iss.signer, map[string]any{"archivist_roles": "operator", "iss": "https://evil.example"}),
		"signed by another key":        iss.token(forger, map[string]any{"archivist_roles": "operator"}),
		"a publisher without a source": iss.token(iss.signer, map[string]any{"archivist_roles": "publisher"}),
		"a bad source":                 iss.token(iss.signer, map[string]any{"archivist_roles": "publisher", "archivist_source": "Bad Source"}),
		"not a token at all":           "a.b.c",
	} {
		if code, body := do("POST", "/v1/admin", tok); code != http.StatusUnauthorized || !strings.Contains(body, "token refused") {
			t.Errorf("%s: %d %s, want 401 token refused", name, code, body)
		}
	}
	if iss.fetches.Load() == 0 {
		t.Error("the issuer's keys were never fetched")
	}
	// A flood of tokens signed by keys the issuer does not have: at most
	// one fetch of its keys per jwksRefetchEvery, not one per token.
	before := iss.fetches.Load()
	unknown, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: otherKey}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k9"))
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if code, _ := do("GET", "/v1/status", iss.token(unknown, map[string]any{"archivist_roles": "reader"})); code != http.StatusUnauthorized {
			t.Fatalf("a token of an unknown key: %d, want 401", code)
		}
	}
	if n := iss.fetches.Load() - before; n > 1 {
		t.Errorf("50 tokens of an unknown key fetched the issuer's keys %d times, want at most 1", n)
	}

	// JWTs alone, without a keys file; and the configuration's faults.
	jwtOnly := cfg
	jwtOnly.KeysFile = ""
	if a, err = New(jwtOnly); err != nil {
		t.Fatal(err)
	}
	h = a.Wrap(testRoutes())
	if code, _ := do("POST", "/v1/admin", operator); code != 200 {
		t.Errorf("JWTs without a keys file: %d", code)
	}
	if code, _ := do("POST", "/v1/admin", ops); code != http.StatusUnauthorized {
		t.Errorf("a key without a keys file: %d, want 401", code)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.JWT.JWKSURL = "" }, "API_JWT_JWKS_URL"},
		{func(c *Config) { c.JWT.Audience = "" }, "API_JWT_AUDIENCE"},
		{func(c *Config) { c.JWT.Issuer = "" }, "API_KEYS_FILE"},
	} {
		bad := jwtOnly
		c.edit(&bad)
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: want an error naming %s", err, c.want)
		}
	}
}
