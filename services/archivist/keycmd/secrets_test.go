package keycmd

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
)

type list struct {
	Kind  string   `json:"kind"`
	Items []secret `json:"items"`
}

func secretsOf(t *testing.T, o SecretsOptions) (list, string) {
	t.Helper()
	var out, key strings.Builder
	if err := Secrets(o, &out, &key); err != nil {
		t.Fatal(err)
	}
	var l list
	if err := json.Unmarshal([]byte(out.String()), &l); err != nil {
		t.Fatalf("not JSON kubectl takes: %v\n%s", err, out.String())
	}
	return l, key.String()
}

func find(l list, ns, name string) *secret {
	for i, s := range l.Items {
		if s.Metadata.Namespace == ns && s.Metadata.Name == name {
			return &l.Items[i]
		}
	}
	return nil
}

// TestSecretsOfAFirstInstall: every Secret the charts read is made, in the
// namespace that reads it, with a password of its own, the NATS side's
// the same as its client's; the operator's key is printed once and its
// hash alone is in archivist-api-keys; --only rotates the named ones alone.
func TestSecretsOfAFirstInstall(t *testing.T) {
	l, keyText := secretsOf(t, SecretsOptions{Namespace: "archive-prod", NATSNamespace: "messaging", Operator: "ops"})
	if l.Kind != "List" {
		t.Fatalf("kind %q", l.Kind)
	}
	seen := map[string]bool{}
	for _, u := range events.Users() {
		side := find(l, "messaging", "nats-"+u)
		if side == nil {
			t.Fatalf("no nats-%s in the NATS namespace", u)
		}
		client := find(l, "archive-prod", "nats-"+u)
		if u == "operator" {
			if client != nil {
				t.Error("the operator's NATS password is in Archivist's namespace, where nothing reads it")
			}
			continue
		}
		if client == nil || client.StringData["password"] != side.StringData["password"] {
			t.Errorf("nats-%s: the client's and the server's passwords differ or one is missing", u)
		}
		pw := side.StringData["password"]
		if len(pw) < 40 || seen[pw] {
			t.Errorf("nats-%s: a password of %d characters, or one another user has", u, len(pw))
		}
		seen[pw] = true
	}
	for _, r := range DatabaseRoles {
		s := find(l, "archive-prod", "archivist-db-"+r)
		if s == nil || s.Type != "kubernetes.io/basic-auth" || s.StringData["username"] != r || len(s.StringData["password"]) < 40 {
			t.Errorf("archivist-db-%s: %+v", r, s)
		}
	}
	keys := find(l, "archive-prod", "archivist-api-keys")
	if keys == nil {
		t.Fatal("no archivist-api-keys")
	}
	parsed, err := apiauth.ParseKeys(keys.StringData["api-keys"])
	if err != nil || len(parsed) != 1 || !parsed[0].Has(apiauth.Operator) {
		t.Fatalf("api-keys: %v %+v", err, parsed)
	}
	key := regexp.MustCompile(`(?m)^  (\S+)$`).FindStringSubmatch(keyText)
	if key == nil || apiauth.HashKey(key[1]) != parsed[0].Hash || strings.Contains(keys.StringData["api-keys"], key[1]) {
		t.Errorf("the printed key does not match the stored hash, or is stored itself: %q", keyText)
	}

	rot, _ := secretsOf(t, SecretsOptions{Namespace: "archive-prod", NATSNamespace: "messaging", Only: []string{"nats-curator", "archivist-db-pwa"}})
	var names []string
	for _, s := range rot.Items {
		names = append(names, s.Metadata.Namespace+"/"+s.Metadata.Name)
	}
	slices.Sort(names)
	if want := []string{"archive-prod/archivist-db-pwa", "archive-prod/nats-curator", "messaging/nats-curator"}; !slices.Equal(names, want) {
		t.Errorf("--only nats-curator,archivist-db-pwa made %v, want %v", names, want)
	}
	if find(rot, "messaging", "nats-curator").StringData["password"] == find(l, "messaging", "nats-curator").StringData["password"] {
		t.Error("a rotation kept the password")
	}
	if err := Secrets(SecretsOptions{Namespace: "a", NATSNamespace: "b", Only: []string{"nats-nobody"}}, &strings.Builder{}, &strings.Builder{}); err == nil {
		t.Error("--only of an unknown Secret made nothing and said nothing")
	}
}

// TestDatabaseRolesAreTheChartsRoles: the roles made are those the
// chart's catalog gives a database (and so CloudNativePG's managed roles).
func TestDatabaseRolesAreTheChartsRoles(t *testing.T) {
	b, err := os.ReadFile("../../../charts/archivist/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range regexp.MustCompile(`(?m)^(\w+): \{[^\n]*database: true`).FindAllStringSubmatch(string(b), -1) {
		roles = append(roles, m[1])
	}
	if !slices.Equal(roles, DatabaseRoles) {
		t.Errorf("the chart's database roles %v, keycmd.DatabaseRoles %v", roles, DatabaseRoles)
	}
}
