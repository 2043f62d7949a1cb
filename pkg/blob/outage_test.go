package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/blobtest"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
)

// TestLocalRootGoneIsAnOutage: the store's directory unmounted (here moved
// away) is an outage of the blob store, never a missing object; a write
// meanwhile does not make a new, empty store in its place; when the
// directory is back, every object is there.
func TestLocalRootGoneIsAnOutage(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "blobs")
	s, err := blob.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "audio/a.wav", strings.NewReader("RIFF"), nil); err != nil {
		t.Fatal(err)
	}
	if err := blob.Check(ctx, s); err != nil {
		t.Fatalf("store up: %v", err)
	}
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"check": blob.Check(ctx, s),
		"stat":  func() error { _, err := s.Stat(ctx, "audio/a.wav"); return err }(),
		"get":   func() error { _, _, err := s.Get(ctx, "audio/a.wav"); return err }(),
		"put":   func() error { _, err := s.Put(ctx, "audio/b.wav", strings.NewReader("x"), nil); return err }(),
		"list": func() error {
			for _, err := range s.List(ctx, "") {
				return err
			}
			return nil
		}(),
		"delete": s.Delete(ctx, "audio/a.wav"),
	} {
		if fault.DependencyOf(err) != fault.BlobStore || errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s with the root gone: %v, want an outage of the blob store, not a missing object", name, err)
		}
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("a write with the root gone made a new store in its place (%v)", err)
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Get(ctx, "audio/a.wav")
	if err != nil {
		t.Fatalf("root back: %v", err)
	}
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<10))
	rc.Close()
	if !bytes.Equal(b, []byte("RIFF")) {
		t.Fatalf("read %q", b)
	}
	if _, err := s.Stat(ctx, "audio/none.wav"); !errors.Is(err, blob.ErrNotFound) || fault.IsOutage(err) {
		t.Errorf("a missing object with the store up: %v, want ErrNotFound", err)
	}
}

// TestS3EndpointDownIsAnOutage: the S3 stand-in stopped; every call is an
// outage of the blob store, not a missing object.
func TestS3EndpointDownIsAnOutage(t *testing.T) {
	srv := httptest.NewServer(blobtest.NewS3Handler(blobtest.S3Options{}).Handler)
	endpoint := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if err := makeBucket(ctx, endpoint, "down"); err != nil {
		t.Fatal(err)
	}
	s, err := blob.Open(ctx, blob.Config{URL: "s3://down/?endpoint=" + endpoint + "&secure=false&path_style=true&region=us-east-1",
		S3AccessKeyID: "key", S3SecretAccessKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := blob.Check(ctx, s); err != nil {
		t.Fatalf("endpoint up: %v", err)
	}
	srv.Close()
	_, statErr := s.Stat(ctx, "audio/a.wav")
	_, putErr := s.Put(ctx, "audio/a.wav", strings.NewReader("x"), nil)
	for name, err := range map[string]error{"check": blob.Check(ctx, s), "stat": statErr, "put": putErr} {
		if fault.DependencyOf(err) != fault.BlobStore || errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s with the endpoint down: %v, want an outage of the blob store", name, err)
		}
	}
}
