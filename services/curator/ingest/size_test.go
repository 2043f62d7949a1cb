package ingest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPackagesStayReadable keeps ingest in rooms a newcomer can read: each
// package under 1,200 lines of code (tests aside), each file under 700.
// A package that outgrows it is split by concern, not the bound raised.
// Lines of code are the lines with code on them: doc comments, which every
// exported name carries, and blank lines are not counted against a room.
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
		n := codeLines(b)
		if n > 700 {
			t.Errorf("%s has %d lines of code, more than 700", path, n)
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
			t.Errorf("package %s has %d lines of code, 1,200 or more: split it by concern", pkg, n)
		}
	}
}

// codeLines counts the lines of Go source b that hold code: not blank, not
// a line comment alone.
func codeLines(b []byte) int {
	n := 0
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && !bytes.HasPrefix(line, []byte("//")) {
			n++
		}
	}
	return n
}

// TestOnlyIngestTouchesItsTables keeps ingest's tables in their room: the
// batches, jobs and their history are written by package ingest alone
// (its Store and the typed statements of jobs.go) and read elsewhere only
// by the rooms made to read them: views (what people see), daemon (the
// claims on the state machine's rows), workitems (the console's finder)
// and ingesttest (the tests' rows). Any other Go file of the repository
// that names one is a room without walls again.
func TestOnlyIngestTouchesItsTables(t *testing.T) {
	tables := regexp.MustCompile(`curator\.(jobs|batches|ingest_history)\b|"curator", "(jobs|batches)"`)
	writes := regexp.MustCompile(`(?i)(UPDATE|INSERT INTO|DELETE FROM)\s+curator\.(jobs|batches|ingest_history)\b`)
	readers := map[string]bool{"views": true, "daemon": true, "workitems": true}
	root := filepath.Join("..", "..", "..")
	seen := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		seen++
		b, err := os.ReadFile(path)
		if err != nil || !tables.Match(b) {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(filepath.Join("services", "curator", "ingest"), filepath.Dir(rel))
		switch {
		case dir == "." || dir == "ingesttest":
		case readers[dir]:
			if w := writes.Find(b); w != nil {
				t.Errorf("%s writes ingest's tables (%q): only package ingest writes them", rel, w)
			}
		default:
			t.Errorf("%s names ingest's tables (%q): read and write them through package ingest", rel, tables.Find(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 200 {
		t.Fatalf("only %d Go files found under %s", seen, root)
	}
}
