package testenv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
)

// TestSharedDataSkipsSayingWhatAndRecordIt: without the variable, a test
// asking for shared material skips with one line saying what it would
// have shown, and the skip is appended to the run's list; with it, the
// test gets the directory.
func TestSharedDataSkipsSayingWhatAndRecordIt(t *testing.T) {
	list := filepath.Join(t.TempDir(), "skips")
	t.Setenv(testenv.SkipsVar, list)
	t.Setenv(testenv.SharedDataVar, "")
	t.Run("absent", func(t *testing.T) {
		testenv.SharedData(t, "warc/reference", "CDX identical to pywb's")
		t.Error("not skipped")
	})
	b, err := os.ReadFile(list)
	if err != nil || !strings.Contains(string(b), "TestSharedDataSkipsSayingWhatAndRecordIt/absent: ARCHIVIST_TESTDATA is not set: CDX identical to pywb's") {
		t.Fatalf("the skip list: %q %v", b, err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "audio"), 0o755)
	t.Setenv(testenv.SharedDataVar, dir)
	if got := testenv.SharedData(t, "audio", "x"); got != filepath.Join(dir, "audio") {
		t.Fatalf("got %s", got)
	}
}
