package httpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
)

// jwtVerifier checks bearer JWTs against an OIDC issuer's published keys
// (go-oidc: signature, iss, aud, exp and nbf) and maps their claims to an
// Identity.
type jwtVerifier struct {
	cfg      JWTConfig
	verifier *oidc.IDTokenVerifier
}

func newJWTVerifier(cfg JWTConfig) (*jwtVerifier, error) {
	switch {
	case cfg.JWKSURL == "":
		return nil, errors.New("API_JWT_ISSUER needs API_JWT_JWKS_URL, where the issuer publishes its signing keys")
	case cfg.Audience == "":
		return nil, errors.New("API_JWT_ISSUER needs API_JWT_AUDIENCE, the audience a token must name")
	case cfg.RolesClaim == "":
		return nil, errors.New("API_JWT_ROLES_CLAIM is empty")
	}
	algs := []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.EdDSA}
	keys := &jwksKeys{url: cfg.JWKSURL, client: &http.Client{Timeout: jwksTimeout}, every: jwksRefetchEvery}
	for _, a := range algs {
		keys.algs = append(keys.algs, jose.SignatureAlgorithm(a))
	}
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{ClientID: cfg.Audience, SupportedSigningAlgs: algs})
	return &jwtVerifier{cfg: cfg, verifier: v}, nil
}

// JWTNamePrefix begins the name of every token's holder ("oidc:" and the
// token's subject).
const JWTNamePrefix = "oidc:"

// The issuer's key set is fetched within jwksTimeout, and again, for a
// token its keys do not verify (a rotation), at most every
// jwksRefetchEvery.
const (
	jwksTimeout      = 10 * time.Second
	jwksRefetchEvery = 30 * time.Second
)

// jwksKeys is an issuer's signing keys (an oidc.KeySet): fetched on first
// use, and again when a token is not verified by the keys held (a key
// rotation), but at most once every `every`, one fetch at a time, each
// bounded in time. go-oidc's remote key set fetched again for every token
// with a bad signature, without a timeout: a flood of forged tokens was a
// flood of fetches, and a slow issuer held every request.
type jwksKeys struct {
	url    string
	client *http.Client
	every  time.Duration
	algs   []jose.SignatureAlgorithm

	fetch   sync.Mutex // one fetch at a time
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // when the last fetch began (zero: never)
}

// VerifySignature implements oidc.KeySet.
func (k *jwksKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must have one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys, fetched := k.keys, k.fetched
	k.mu.Unlock()
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	if !fetched.IsZero() && time.Since(fetched) < k.every {
		return nil, errors.New("no key of the issuer verifies the token's signature")
	}
	if keys, err = k.refetch(ctx, fetched); err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	return nil, errors.New("no key of the issuer verifies the token's signature")
}

// refetch fetches the key set again unless another caller did since seen.
func (k *jwksKeys) refetch(ctx context.Context, seen time.Time) ([]jose.JSONWebKey, error) {
	k.fetch.Lock()
	defer k.fetch.Unlock()
	k.mu.Lock()
	if !k.fetched.Equal(seen) {
		keys := k.keys
		k.mu.Unlock()
		return keys, nil
	}
	k.fetched = time.Now()
	k.mu.Unlock()
	// Not the request's context: its cancellation must not end a fetch
	// others wait for; the client's timeout bounds it.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the issuer's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the issuer's keys: %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("the issuer's keys: %w", err)
	}
	k.mu.Lock()
	k.keys = set.Keys
	k.mu.Unlock()
	return set.Keys, nil
}

// verifyWith verifies jws with the keys of id kid (every key when the
// token names none).
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for _, key := range keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&key); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// looksLikeJWT tells a compact JWS (three base64url parts) from an API key.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 && !strings.HasPrefix(s, "ak_") }

// verify checks raw and returns its holder: the subject as name, the roles
// of the roles claim, and a publisher's source from the source claim.
func (v *jwtVerifier) verify(ctx context.Context, raw string) (apiauth.Identity, error) {
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return apiauth.Identity{}, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return apiauth.Identity{}, fmt.Errorf("claims: %w", err)
	}
	// A token's holder is named in a space of its own: keys-file names
	// cannot hold a ':', so no identity provider's subject is a key's
	// depositor (a client that chooses its subject "radio" is not radio).
	id := apiauth.Identity{Name: JWTNamePrefix + tok.Subject}
	var names []string
	switch rs := claims[v.cfg.RolesClaim].(type) {
	case string:
		names = strings.Fields(rs)
	case []any:
		for _, r := range rs {
			if s, ok := r.(string); ok {
				names = append(names, s)
			}
		}
	}
	for _, n := range names {
		switch r := apiauth.Role(n); r {
		case apiauth.Reader, apiauth.Publisher, apiauth.Operator:
			id.Roles = append(id.Roles, r)
		}
	}
	if src, ok := claims[v.cfg.SourceClaim].(string); ok && src != "" {
		if err := events.ValidateSource(v.cfg.SourceClaim, src); err != nil {
			return apiauth.Identity{}, err
		}
		id.Source = src
	}
	if id.Has(apiauth.Publisher) && id.Source == "" {
		return apiauth.Identity{}, fmt.Errorf("a publisher's token must name its source (claim %s)", v.cfg.SourceClaim)
	}
	cs := claimList(claims[v.cfg.CollectionsClaim])
	if slices.Contains(id.Roles, apiauth.Publisher) {
		if id.Collections, err = apiauth.ParseCollections(v.cfg.CollectionsClaim, strings.Join(cs, ",")); err != nil {
			return apiauth.Identity{}, err
		}
		if id.ARKs, err = apiauth.ParseARKShoulders(v.cfg.ARKsClaim, strings.Join(claimList(claims[v.cfg.ARKsClaim]), ",")); err != nil {
			return apiauth.Identity{}, err
		}
	}
	if tok.Subject == "" {
		return apiauth.Identity{}, errors.New("the token has no subject")
	}
	return id, nil
}

// claimList reads a claim that lists names: a JSON list of strings, or a
// string of names separated by spaces or commas.
func claimList(claim any) []string {
	var out []string
	switch c := claim.(type) {
	case string:
		out = strings.Fields(strings.ReplaceAll(c, ",", " "))
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
