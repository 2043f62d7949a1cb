package testenv_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestEventuallyWaitsForTheCondition: it returns once the condition holds
// and fails, naming what it waited for, when it never does.
func TestEventuallyWaitsForTheCondition(t *testing.T) {
	n := 0
	testenv.Eventually(t, 5*time.Second, "three checks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("checked %d times", n)
	}
	ft := &fatalT{TB: t}
	func() {
		defer func() { recover() }()
		testenv.Eventually(ft, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if !strings.Contains(ft.msg, "timed out after 20ms waiting for never") {
		t.Fatalf("failed with %q", ft.msg)
	}
}

// fatalT records a Fatalf instead of ending the test.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
