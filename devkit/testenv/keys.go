package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/apiauth"
)

// APIKey is a key of a test's keys file: its holder, roles, and for a
// publisher its source, the collections it deposits into and the ARK
// shoulders under which it may supply new objects' ARKs.
type APIKey struct {
	Name        string
	Roles       []apiauth.Role
	Source      string
	Collections []string
	ARKs        []string
}

// KeysFile makes a key for each of keys and writes their keys file (as
// `archivist key new` lines) under a directory of the test's. It returns
// the file and each holder's key, by name.
func KeysFile(t testing.TB, keys ...APIKey) (file string, tokens map[string]string) {
	t.Helper()
	tokens = map[string]string{}
	var lines []string
	for _, k := range keys {
		key, line := apiauth.NewKeyFor(apiauth.Identity{Name: k.Name, Roles: k.Roles, Source: k.Source, Collections: k.Collections, ARKs: k.ARKs})
		tokens[k.Name] = key
		lines = append(lines, line)
	}
	file = filepath.Join(t.TempDir(), "api-keys")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, tokens
}
