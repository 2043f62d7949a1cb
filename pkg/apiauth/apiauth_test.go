package apiauth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/apiauth"
)

// TestRolesAndScopes: an operator also reads, a publisher does not (it
// reads its own); a publisher deposits into its collections only (or
// every one with "*"); a caller and its credential travel in a context.
func TestRolesAndScopes(t *testing.T) {
	op := apiauth.Identity{Name: "ops", Roles: []apiauth.Role{apiauth.Operator}}
	pub := apiauth.Identity{Name: "tv", Roles: []apiauth.Role{apiauth.Publisher}, Source: "tv", Collections: []string{"tv-news"}}
	all := apiauth.Identity{Name: "all", Roles: []apiauth.Role{apiauth.Publisher, apiauth.Reader}, Source: "all", Collections: []string{apiauth.AnyCollection}}
	for _, c := range []struct {
		what string
		got  bool
		want bool
	}{
		{"an operator reads", op.Has(apiauth.Reader), true},
		{"a publisher reads everyone's", pub.Has(apiauth.Reader), false},
		{"a publisher reads only its own", pub.OwnOnly(), true},
		{"a publisher and reader reads everyone's", all.OwnOnly(), false},
		{"a publisher deposits into its collection", pub.MayDeposit("tv-news"), true},
		{"a publisher deposits into another's", pub.MayDeposit("radio"), false},
		{"* is every collection", all.MayDeposit("radio"), true},
		{"an operator deposits", op.MayDeposit("tv-news"), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	ctx := apiauth.WithCredential(apiauth.WithCaller(context.Background(), pub), "ak_x")
	if id, ok := apiauth.Caller(ctx); !ok || id.Name != "tv" || apiauth.Credential(ctx) != "ak_x" {
		t.Errorf("from the context: %+v %v %q", id, ok, apiauth.Credential(ctx))
	}
	if _, ok := apiauth.Caller(context.Background()); ok {
		t.Error("a context without a caller has one")
	}
}

// TestANewKeysLineReadsBack: the line NewKeyFor writes parses to the same
// identity, and holds the key's hash, never the key.
func TestANewKeysLineReadsBack(t *testing.T) {
	id := apiauth.Identity{Name: "press", Roles: []apiauth.Role{apiauth.Publisher, apiauth.Reader}, Source: "press",
		Collections: []string{"press-a", "press-b"}, ARKs: []string{"ark:/12345/x9"}}
	key, line := apiauth.NewKeyFor(id)
	if strings.Contains(line, key) || !strings.Contains(line, apiauth.HashKey(key)) {
		t.Fatalf("the keys line %q must hold the key's hash, not the key", line)
	}
	keys, err := apiauth.ParseKeys("# a comment\n\n" + line + "\n")
	if err != nil || len(keys) != 1 {
		t.Fatalf("%q: %v %v", line, keys, err)
	}
	got := keys[0]
	if got.Name != id.Name || got.Source != id.Source || strings.Join(got.Collections, ",") != "press-a,press-b" ||
		strings.Join(got.ARKs, ",") != "ark:/12345/x9" || len(got.Roles) != 2 || got.Hash != apiauth.HashKey(key) {
		t.Errorf("read back %+v from %q", got, line)
	}
	if _, err := apiauth.ParseARKShoulders("arks", "ark:/12345/x9,notanark"); err == nil {
		t.Error("a shoulder that is no ARK was taken")
	}
}

// TestKeyNamesCannotEscapeTheirScope (N28): a keys file refuses a '.', a
// wildcard or a space in a key's name, source or collections: each is a
// token of the NATS subjects and users it scopes, and a depositor's name.
func TestKeyNamesCannotEscapeTheirScope(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	if _, err := apiauth.ParseKeys("radio-news publisher " + hash + " source=radio-news collections=radio-news"); err != nil {
		t.Fatalf("a plain key: %v", err)
	}
	for _, line := range []string{
		"radio.news publisher " + hash + " source=radio",
		"radio publisher " + hash + " source=radio.news",
		"radio publisher " + hash + " source=radio collections=radio.news",
		"radio publisher " + hash + " source=radio collections=radio-*",
		"radio* reader " + hash,
	} {
		if _, err := apiauth.ParseKeys(line); err == nil {
			t.Errorf("keys line %q was taken", line)
		}
	}
}
