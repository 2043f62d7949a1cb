package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/service"
)

// TestWritableSaysWhichDirectory: the init check passes on directories
// the process may write, leaving nothing behind, and fails on one it may
// not, naming it and the user; with no directory it says what to give.
func TestWritableSaysWhichDirectory(t *testing.T) {
	ok1, ok2 := t.TempDir(), t.TempDir()
	if err := service.Writable(ok1, ok2); err != nil {
		t.Fatalf("writable directories: %v", err)
	}
	for _, d := range []string{ok1, ok2} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("%s holds %d entries after the check, want none", d, len(entries))
		}
	}
	missing := filepath.Join(ok1, "no-such-dir")
	err := service.Writable(ok1, missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "uid") {
		t.Errorf("a directory that does not exist: %v; want an error naming it and the user", err)
	}
	if os.Getuid() != 0 { // root writes whatever the mode says
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o755) })
		if err := service.Writable(ro); err == nil || !strings.Contains(err.Error(), ro) {
			t.Errorf("a read-only directory: %v", err)
		}
	}
	if err := service.Writable(); err == nil {
		t.Error("no directory named: no error")
	}
}
