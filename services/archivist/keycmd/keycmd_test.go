package keycmd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/apiauth"
)

// TestInitMakesAKeyOfItsOwn: a system's first start makes a key no other
// system has, with its hash in the keys file and the key in a file its
// owner alone reads; a second start keeps it.
func TestInitMakesAKeyOfItsOwn(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if err := Init(dir, "", io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	token := func(dir string) string {
		var out strings.Builder
		if err := Token(dir, &out); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	ka, kb := token(a), token(b)
	if ka == kb || !strings.HasPrefix(ka, "ak_") {
		t.Fatalf("two systems' keys: %q, %q", ka, kb)
	}
	st, err := os.Stat(filepath.Join(a, TokenFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v %v, want 0600", st.Mode(), err)
	}
	text, _ := os.ReadFile(filepath.Join(a, KeysFile))
	keys, err := apiauth.ParseKeys(string(text))
	if err != nil || len(keys) != 1 || keys[0].Hash != apiauth.HashKey(ka) || strings.Contains(string(text), ka) ||
		!keys[0].MayDeposit("any") || keys[0].OwnOnly() {
		t.Errorf("the keys file: %+v %v", keys, err)
	}
	if err := Init(a, "", io.Discard); err != nil || token(a) != ka {
		t.Errorf("a second start changed the key: %v", err)
	}
	// With a token directory of its own (N34: compose mounts the keys
	// file in every service, the key in none), the key goes there, and
	// one an earlier start left beside the keys file moves there.
	keysDir, tokenDir := t.TempDir(), t.TempDir()
	if err := Init(keysDir, tokenDir, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(keysDir, TokenFile)); err == nil {
		t.Error("the key is beside the keys file every service mounts")
	}
	if k := token(tokenDir); !strings.HasPrefix(k, "ak_") {
		t.Errorf("the token directory's key: %q", k)
	}
	moved := t.TempDir()
	if err := Init(a, moved, io.Discard); err != nil || token(moved) != ka {
		t.Errorf("an earlier start's key did not move: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a, TokenFile)); err == nil {
		t.Error("the earlier start's key is still beside the keys file")
	}
}
