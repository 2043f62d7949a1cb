package container_test

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest/container"
)

// write makes a zip of the named bodies (Deflate) and returns its path.
func write(t *testing.T, entries map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range entries {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "c.zip")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var roomy = container.Limits{MaxBytes: 1 << 30, MaxEntries: 100, MaxRatio: 100}

// TestExtractWritesEveryEntryWithItsDigest unpacks a container and
// reports each file's size and sha256.
func TestExtractWritesEveryEntryWithItsDigest(t *testing.T) {
	src := write(t, map[string][]byte{"a.txt": []byte("abc"), "d/b.txt": []byte("hello")})
	zr, total, err := container.Open(src, roomy)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if total != 8 {
		t.Errorf("total %d, want 8", total)
	}
	dst := t.TempDir()
	got, err := container.Extract(zr, dst)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range got {
		sums[e.Name] = e.SHA256
	}
	if sums["a.txt"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || len(got) != 2 {
		t.Errorf("entries %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "d", "b.txt")); err != nil || string(b) != "hello" {
		t.Errorf("d/b.txt: %q, %v", b, err)
	}
}

// TestOpenRefusesBadContainersBeforeWriting: each bound and each unsafe
// name is refused from the central directory, with its reason.
func TestOpenRefusesBadContainersBeforeWriting(t *testing.T) {
	big := bytes.Repeat([]byte{0}, 17<<20) // compresses far beyond 100:1
	for _, c := range []struct {
		name    string
		entries map[string][]byte
		lim     container.Limits
		want    string
	}{
		{"escape", map[string][]byte{"../../etc/passwd": []byte("x")}, roomy, "escapes the object"},
		{"twice", map[string][]byte{"A.txt": []byte("x"), "a.txt": []byte("y")}, roomy, "twice"},
		{"entries", map[string][]byte{"a": nil, "b": nil, "c": nil}, container.Limits{MaxBytes: 1 << 30, MaxEntries: 2, MaxRatio: 100}, "INGEST_MAX_ZIP_ENTRIES"},
		{"bytes", map[string][]byte{"a": []byte("0123456789")}, container.Limits{MaxBytes: 5, MaxEntries: 10, MaxRatio: 100}, "INGEST_MAX_FILE_BYTES"},
		{"ratio", map[string][]byte{"bomb": big}, roomy, "INGEST_MAX_ZIP_RATIO"},
	} {
		if _, _, err := container.Open(write(t, c.entries), c.lim); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
