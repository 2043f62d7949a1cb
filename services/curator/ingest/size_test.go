package ingest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackagesStayReadable keeps ingest in rooms a newcomer can read: each
// package under 1,200 lines of code (tests aside), each file under 700.
// A package that outgrows it is split by concern, not the bound raised.
func TestPackagesStayReadable(t *testing.T) {
	perPackage := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		if n > 700 {
			t.Errorf("%s has %d lines, more than 700", path, n)
		}
		perPackage[filepath.Dir(path)] += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perPackage) < 10 {
		t.Fatalf("only %d packages found: %v", len(perPackage), perPackage)
	}
	for pkg, n := range perPackage {
		if n >= 1200 {
			t.Errorf("package %s has %d lines, 1,200 or more: split it by concern", pkg, n)
		}
	}
}
