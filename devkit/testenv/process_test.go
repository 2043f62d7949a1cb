package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.log")
	var lines []string
	for i := range 100 {
		lines = append(lines, strings.Repeat("x", i%7)+"line")
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3, 60, 100, 150} {
		want := strings.Join(lines[max(len(lines)-n, 0):], "\n")
		if got := tailLines(path, n); got != want {
			t.Errorf("tailLines(%d) = %q, want %q", n, got, want)
		}
	}
	if got := tailLines(filepath.Join(t.TempDir(), "absent"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("tailLines of a missing file = %q, want the error", got)
	}
}
