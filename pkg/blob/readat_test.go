package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
)

// TestReaderAtReadsRanges: on a local store and on S3 (MinIO), ReaderAt
// reads any part of an object, a ranged read each; past the end it says
// io.EOF with what there was; a missing object is ErrNotFound.
func TestReaderAtReadsRanges(t *testing.T) {
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s3, _ := testenv.MinIOBucket(t, "")
	ctx := context.Background()
	body := []byte(strings.Repeat("0123456789", 1000))
	for name, s := range map[string]blob.Store{"local": local, "s3": s3} {
		if _, err := s.Put(ctx, "index/part-0.cdx.gz", bytes.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(blob.RangeReader); !ok {
			t.Errorf("%s: no ranged reads", name)
		}
		ra, err := blob.ReaderAt(ctx, s, "index/part-0.cdx.gz")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			off, n int
		}{{0, 10}, {4321, 100}, {9990, 10}} {
			p := make([]byte, c.n)
			if n, err := ra.ReadAt(p, int64(c.off)); n != c.n || err != nil || !bytes.Equal(p, body[c.off:c.off+c.n]) {
				t.Errorf("%s: %d bytes at %d: %d, %v, %q", name, c.n, c.off, n, err, p[:n])
			}
		}
		p := make([]byte, 20)
		if n, err := ra.ReadAt(p, 9990); n != 10 || err != io.EOF {
			t.Errorf("%s: past the end: %d, %v; want 10 and io.EOF", name, n, err)
		}
		missing, _ := blob.ReaderAt(ctx, s, "index/none")
		if _, err := missing.ReadAt(p, 0); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s: a missing object: %v, want not found", name, err)
		}
	}
}
