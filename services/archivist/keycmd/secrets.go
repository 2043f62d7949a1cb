package keycmd

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
)

// DatabaseRoles are the services that log in to PostgreSQL as a role of
// their own (the chart's catalog: database: true).
var DatabaseRoles = []string{"curator", "pwa", "cwa", "indexer", "aggregator", "auditor"}

// SecretsOptions say where the Secrets of a first install go and which.
type SecretsOptions struct {
	// Namespace is the Archivist release's namespace.
	Namespace string
	// NATSNamespace is the NATS side's (charts/archivist-nats).
	NATSNamespace string
	// Only, if set, limits the output to these Secrets' names (a rotation:
	// new values for those alone).
	Only []string
	// Operator names the first operator's API key ("" none).
	Operator string
}

// secret is a Kubernetes Secret as kubectl takes it.
type secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   secretMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	StringData map[string]string `json:"stringData"`
}

type secretMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Secrets is `archivist secrets`: the Secrets a first install needs, with
// new random passwords, as a Kubernetes List for `kubectl create -f -`
// (create, never apply: an existing Secret is left as it is and named in
// the error). In Archivist's namespace: nats-<user> (key password) for
// every service, the dashboard and deploy (the migrate Job), and
// archivist-db-<service> (basic-auth) for each database role; with
// Operator, archivist-api-keys holding that operator's key, printed once
// to keyOut. In the NATS side's namespace: nats-<user> for every NATS user
// (the same passwords: the server checks what the clients present). With
// Only, just those Secrets: the rotation of docs/RUNBOOK.md.
func Secrets(o SecretsOptions, stdout, keyOut io.Writer) error {
	if o.Namespace == "" || o.NATSNamespace == "" {
		return fmt.Errorf("secrets: the Archivist and the NATS namespaces are both needed")
	}
	var items []secret
	want := func(name string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, name) }
	users := events.Users()
	for _, u := range users {
		name := "nats-" + u
		if !want(name) {
			continue
		}
		pw, err := newPassword()
		if err != nil {
			return err
		}
		if u != "operator" {
			items = append(items, secret{Metadata: secretMeta{Name: name, Namespace: o.Namespace}, StringData: map[string]string{"password": pw}})
		}
		if o.NATSNamespace != o.Namespace || u == "operator" {
			items = append(items, secret{Metadata: secretMeta{Name: name, Namespace: o.NATSNamespace}, StringData: map[string]string{"password": pw}})
		}
	}
	for _, r := range DatabaseRoles {
		name := "archivist-db-" + r
		if !want(name) {
			continue
		}
		pw, err := newPassword()
		if err != nil {
			return err
		}
		// CloudNativePG sets the role's password from it, and again when
		// it changes (the label has the operator watch it).
		items = append(items, secret{Metadata: secretMeta{Name: name, Namespace: o.Namespace, Labels: map[string]string{"cnpg.io/reload": "true"}},
			Type: "kubernetes.io/basic-auth", StringData: map[string]string{"username": r, "password": pw}})
	}
	if o.Operator != "" && want("archivist-api-keys") {
		key, line := apiauth.NewKeyFor(apiauth.Identity{Name: o.Operator, Roles: []apiauth.Role{apiauth.Operator}})
		items = append(items, secret{Metadata: secretMeta{Name: "archivist-api-keys", Namespace: o.Namespace},
			StringData: map[string]string{"api-keys": "# API keys: NAME ROLES SHA256-OF-KEY [source=...] (archivist key new)\n" + line + "\n"}})
		fmt.Fprintf(keyOut, "the API key of %s (give it to them; it is not kept):\n  %s\n", o.Operator, key)
	}
	if len(items) == 0 {
		return fmt.Errorf("secrets: --only %s names none of the Secrets made here (nats-<user>, archivist-db-<service>, archivist-api-keys)", strings.Join(o.Only, ","))
	}
	for i := range items {
		items[i].APIVersion, items[i].Kind = "v1", "Secret"
		if items[i].Type == "" {
			items[i].Type = "Opaque"
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// newPassword is 32 random bytes, URL-safe base64: any service takes it as
// is, in a URL or not.
func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("secrets: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
