package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/archivist/archivist/events"
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
	// The key set is fetched on first use and again when a token names an
	// unknown key (rotation), with the background context: a request's
	// cancellation must not poison the cache.
	keys := oidc.NewRemoteKeySet(context.Background(), cfg.JWKSURL)
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{ClientID: cfg.Audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.EdDSA}})
	return &jwtVerifier{cfg: cfg, verifier: v}, nil
}

// looksLikeJWT tells a compact JWS (three base64url parts) from an API key.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 && !strings.HasPrefix(s, "ak_") }

// verify checks raw and returns its holder: the subject as name, the roles
// of the roles claim, and a publisher's source from the source claim.
func (v *jwtVerifier) verify(ctx context.Context, raw string) (Identity, error) {
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("claims: %w", err)
	}
	id := Identity{Name: tok.Subject}
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
		switch r := Role(n); r {
		case Reader, Publisher, Operator:
			id.Roles = append(id.Roles, r)
		}
	}
	if src, ok := claims[v.cfg.SourceClaim].(string); ok && src != "" {
		if err := events.ValidateSource(v.cfg.SourceClaim, src); err != nil {
			return Identity{}, err
		}
		id.Source = src
	}
	if id.Has(Publisher) && id.Source == "" {
		return Identity{}, fmt.Errorf("a publisher's token must name its source (claim %s)", v.cfg.SourceClaim)
	}
	var cs []string
	switch c := claims[v.cfg.CollectionsClaim].(type) {
	case string:
		cs = strings.Fields(strings.ReplaceAll(c, ",", " "))
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok {
				cs = append(cs, s)
			}
		}
	}
	if slices.Contains(id.Roles, Publisher) {
		if id.Collections, err = ParseCollections(v.cfg.CollectionsClaim, strings.Join(cs, ",")); err != nil {
			return Identity{}, err
		}
	}
	if id.Name == "" {
		return Identity{}, errors.New("the token has no subject")
	}
	return id, nil
}
