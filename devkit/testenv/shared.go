package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// SharedDataVar names the directory of test material from other projects
// (pywb's sample archives and their reference CDX, recorded audio): it is
// not the repository's, so a test that compares with it runs only where
// the variable names it, and skips otherwise, saying what it skipped.
const SharedDataVar = "ARCHIVIST_TESTDATA"

// SkipsVar, if set, names a file every Skip appends a line to (the test
// and why), so that a run lists its skips in one place (.ci/run prints
// them at its end).
const SkipsVar = "ARCHIVIST_SKIPS"

var skipMu sync.Mutex

// SharedData returns sub (say "warc/reference") of the shared test
// material, or skips tb, saying what, when ARCHIVIST_TESTDATA is unset or
// lacks it. what says what the test would have shown.
func SharedData(tb testing.TB, sub, what string) string {
	tb.Helper()
	dir := os.Getenv(SharedDataVar)
	if dir == "" {
		Skip(tb, fmt.Sprintf("%s is not set: %s", SharedDataVar, what))
	}
	p := filepath.Join(dir, sub)
	if _, err := os.Stat(p); err != nil {
		Skip(tb, fmt.Sprintf("%s has no %s: %s", SharedDataVar, sub, what))
	}
	return p
}

// Skip skips tb with reason, in one line beginning SKIPPED, and records it
// in the file ARCHIVIST_SKIPS names, if any.
func Skip(tb testing.TB, reason string) {
	tb.Helper()
	if f := os.Getenv(SkipsVar); f != "" {
		skipMu.Lock()
		if w, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(w, "%s: %s\n", tb.Name(), reason)
			w.Close()
		}
		skipMu.Unlock()
	}
	tb.Skip("SKIPPED: " + reason)
}
