// Package apiauth is who calls an Archivist API and what it may do: the
// roles, an authenticated caller's identity (its source, the collections
// it deposits into, the ARK shoulders it may supply) carried in a request's
// context, and the keys file that names them. pkg/service authenticates
// requests (keys, OIDC tokens, browser sessions) into an Identity; the
// services' handlers read it with Caller.
package apiauth

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/archivist/archivist/events"
)

// Role is what an API caller may do.
type Role string

// The roles. An operator may also read; a publisher may also read (the
// status of what it submitted, say).
const (
	// Reader reads status, views and CDX.
	Reader Role = "reader"
	// Publisher posts curation records and submits batches, as the source
	// its key is bound to.
	Publisher Role = "publisher"
	// Operator takes admin actions: release, requeue, delete, reset, checks.
	Operator Role = "operator"
)

// Identity is an authenticated caller.
type Identity struct {
	// Name names the key's holder (a curating system, an operator).
	Name string `json:"name"`
	// Roles are what it may do.
	Roles []Role `json:"roles"`
	// Source, for a publisher, is the source name its records carry.
	Source string `json:"source,omitempty"`
	// Collections, for a publisher, are the collections (ingest profiles)
	// it may deposit batches into; AnyCollection ("*") is every one. A
	// publisher with none deposits nothing.
	Collections []string `json:"collections,omitempty"`
	// ARKs, for a publisher, are the shoulders or NAANs ("ark:/12345/x9",
	// "ark:/12345") under which it may supply the ARK of an object the
	// archive does not hold yet; AnyCollection ("*") is any NAAN. The
	// archive's own shoulder is never one: its ARKs only its minter gives.
	// A publisher with none supplies ARKs only of objects it deposited.
	ARKs []string `json:"arks,omitempty"`
}

// AnyCollection in Identity.Collections lets a depositor deposit into
// every collection.
const AnyCollection = "*"

// MayDeposit reports whether the identity may submit batches into
// collection: a publisher whose collections name it (or AnyCollection).
func (id Identity) MayDeposit(collection string) bool {
	return slices.Contains(id.Roles, Publisher) &&
		(slices.Contains(id.Collections, AnyCollection) || slices.Contains(id.Collections, collection))
}

// OwnOnly reports whether the identity reads only what it deposited itself
// (a publisher's own batches and jobs) rather than everyone's: a publisher
// that is not also staff (a reader or operator), who see all.
func (id Identity) OwnOnly() bool {
	return slices.Contains(id.Roles, Publisher) && !id.Has(Reader)
}

// ParseCollections reads a comma-separated list of collection names (as a
// keys file or a command line gives them), each a source-like name or
// AnyCollection.
func ParseCollections(field, list string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(list, ",") {
		if c == "" {
			continue
		}
		if c != AnyCollection {
			if err := events.ValidateSource(field, c); err != nil {
				return nil, err
			}
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// ParseARKShoulders reads a comma-separated list of ARK shoulders or NAANs
// (as a keys file or a command line gives them), each "ark:" followed by
// a NAAN and, for a shoulder, "/" and its first characters, or "*".
func ParseARKShoulders(field, list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a == "" {
			continue
		}
		if a != AnyCollection && !shoulderPattern.MatchString(a) {
			return nil, fmt.Errorf("%s: %q is not an ARK shoulder or NAAN (ark:/12345, ark:/12345/x9) nor *", field, a)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// shoulderPattern is an ARK shoulder or NAAN, either spelling of the label.
var shoulderPattern = regexp.MustCompile(`^(?i:ark):/?[0-9a-zA-Z]{5,}(/[!-~]*)?$`)

// Has reports whether the identity may act in role. An operator is also
// a reader; a publisher is not (it reads only its own, on the routes that
// scope reads to the caller: Routes.Publisher).
func (id Identity) Has(role Role) bool {
	if slices.Contains(id.Roles, role) {
		return true
	}
	return role == Reader && slices.Contains(id.Roles, Operator)
}

type identityKey struct{}

// Caller returns the request's authenticated identity (with API_AUTH=off, a
// caller named "anonymous" with every role).
func Caller(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// WithCaller returns ctx carrying id (tests of handlers use it).
func WithCaller(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Public is the caller without a key of an open route (a Wayback front
// end's public access point): no role.
var Public = Identity{Name: "public"}

// Anonymous is the caller when authentication is off.
var Anonymous = Identity{Name: "anonymous", Roles: []Role{Reader, Publisher, Operator}, ARKs: []string{AnyCollection}}

// Key is one line of the keys file.
type Key struct {
	Identity
	// Hash is the key's SHA-256, in hex: the file never holds a key.
	Hash string
}

// ParseKeys reads a keys file: a line per key,
//
//	NAME ROLE[,ROLE...] SHA256-OF-THE-KEY-IN-HEX [source=SOURCE] [collections=C[,C...]] [arks=A[,A...]]
//
// with blank lines and lines starting with # ignored. A publisher's key
// names its source; the collections are those it may deposit batches into
// ("*" for every one; none, no batches); the arks the shoulders or NAANs
// under which it may supply the ARKs of new objects ("*" any NAAN; none,
// no new object's). NewKey makes a key and its line.
func ParseKeys(text string) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 6 {
			return nil, fmt.Errorf("keys line %d: want NAME ROLES SHA256 [source=SOURCE] [collections=C,...] [arks=A,...]", n)
		}
		if err := events.ValidateSource("name", f[0]); err != nil {
			return nil, fmt.Errorf("keys line %d: %w", n, err)
		}
		k := Key{Identity: Identity{Name: f[0]}, Hash: strings.ToLower(f[2])}
		for _, r := range strings.Split(f[1], ",") {
			switch Role(r) {
			case Reader, Publisher, Operator:
				k.Roles = append(k.Roles, Role(r))
			default:
				return nil, fmt.Errorf("keys line %d: unknown role %q (reader, publisher, operator)", n, r)
			}
		}
		if b, err := hex.DecodeString(k.Hash); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("keys line %d: the key's hash must be 64 hex digits (SHA-256)", n)
		}
		for _, opt := range f[3:] {
			name, value, _ := strings.Cut(opt, "=")
			switch {
			case name == "source" && k.Source == "":
				if err := events.ValidateSource("source", value); err != nil {
					return nil, fmt.Errorf("keys line %d: %w", n, err)
				}
				k.Source = value
			case name == "collections" && k.Collections == nil:
				cs, err := ParseCollections("collections", value)
				if err != nil {
					return nil, fmt.Errorf("keys line %d: %w", n, err)
				}
				k.Collections = cs
			case name == "arks" && k.ARKs == nil:
				as, err := ParseARKShoulders("arks", value)
				if err != nil {
					return nil, fmt.Errorf("keys line %d: %w", n, err)
				}
				k.ARKs = as
			default:
				return nil, fmt.Errorf("keys line %d: %q: the fields after the hash are source=SOURCE, collections=C,... and arks=A,... (each once)", n, opt)
			}
		}
		if (len(k.Collections) > 0 || len(k.ARKs) > 0) && !slices.Contains(k.Roles, Publisher) {
			return nil, fmt.Errorf("keys line %d: collections and arks are a publisher's (the key has no publisher role)", n)
		}
		if slices.Contains(k.Roles, Publisher) && k.Source == "" {
			return nil, fmt.Errorf("keys line %d: a publisher's key is bound to its source (source=SOURCE)", n)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// NewKey makes a random API key for name with roles (and source and the
// collections it may deposit into, for a publisher) and returns it with its
// keys-file line. The key is shown once; only its hash is kept.
func NewKey(name string, roles []Role, source string, collections ...string) (key, line string) {
	return NewKeyFor(Identity{Name: name, Roles: roles, Source: source, Collections: collections})
}

// NewKeyFor makes a random API key for id and returns it with its
// keys-file line.
func NewKeyFor(id Identity) (key, line string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	key = "ak_" + base64.RawURLEncoding.EncodeToString(b[:])
	rs := make([]string, len(id.Roles))
	for i, r := range id.Roles {
		rs[i] = string(r)
	}
	line = fmt.Sprintf("%s %s %s", id.Name, strings.Join(rs, ","), HashKey(key))
	if id.Source != "" {
		line += " source=" + id.Source
	}
	if len(id.Collections) > 0 {
		line += " collections=" + strings.Join(id.Collections, ",")
	}
	if len(id.ARKs) > 0 {
		line += " arks=" + strings.Join(id.ARKs, ",")
	}
	return key, line
}

// HashKey is the hash a keys file holds for key.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

type credentialKey struct{}

// Credential returns the key or token the request was authenticated with
// ("" when authentication is off), for a service that asks other
// Archivist APIs on its caller's behalf (the dashboard): they then check
// the caller's own roles.
func Credential(ctx context.Context) string {
	s, _ := ctx.Value(credentialKey{}).(string)
	return s
}

// WithCredential returns ctx carrying the key or token its request was
// authenticated with (Credential).
func WithCredential(ctx context.Context, credential string) context.Context {
	return context.WithValue(ctx, credentialKey{}, credential)
}
