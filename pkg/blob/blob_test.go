package blob_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/blob/blobtest"
)

func TestLocal(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, err := blob.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A write cut short by a crash leaves its temporary file beside the
// object: listings and lookups must not see it.
func TestLocalHidesUnfinishedWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a/b.warc", strings.NewReader("whole"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", ".archivist-put-123"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for info, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if fmt.Sprint(keys) != "[a/b.warc]" {
		t.Fatalf("listed %v, want only a/b.warc", keys)
	}
	if _, err := s.Stat(ctx, "a/.archivist-put-123"); err == nil {
		t.Fatal("a temporary file answered Stat")
	}
}

// Metadata rides on the object's file; a sidecar left by a store that
// could not do that (or an older version) is still read.
func TestLocalMetadataOnTheFileOrInASidecar(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "x/on-file", strings.NewReader("one"), map[string]string{"ark": "ark:/1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".archivist-meta", "x", "on-file.json")); !os.IsNotExist(err) {
		t.Fatalf("a sidecar was written where the file system keeps attributes: %v", err)
	}
	info, err := s.Stat(ctx, "x/on-file")
	if err != nil || info.Properties["ark"] != "ark:/1" {
		t.Fatalf("stat: %+v %v", info, err)
	}
	// An object with a sidecar of the old layout.
	p := filepath.Join(dir, "x", "old")
	if err := os.WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	side := fmt.Sprintf(`{"size":3,"sha256":"3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3","mod_unix_nano":%d,"properties":{"ark":"ark:/2"}}`, fi.ModTime().UnixNano())
	if err := os.MkdirAll(filepath.Join(dir, ".archivist-meta", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".archivist-meta", "x", "old.json"), []byte(side), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err = s.Stat(ctx, "x/old")
	if err != nil || info.Properties["ark"] != "ark:/2" || info.Checksum.Value != "3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3" {
		t.Fatalf("stat of an object with a sidecar: %+v %v", info, err)
	}
}

var buckets atomic.Int32

// TestS3 runs the suite against gofakes3, an S3-protocol server in this
// process: real HTTP, real S3 requests, no mock of the interface.
func TestS3(t *testing.T) {
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer srv.Close()
	endpoint := strings.TrimPrefix(srv.URL, "http://")
	blobtest.Run(t, func(t *testing.T) blob.Store {
		bucket := fmt.Sprintf("bucket-%d", buckets.Add(1))
		ctx := context.Background()
		if err := makeBucket(ctx, endpoint, bucket); err != nil {
			t.Fatal(err)
		}
		s, err := blob.Open(ctx, blob.Config{
			URL:               "s3://" + bucket + "/archive?endpoint=" + endpoint + "&secure=false&path_style=true&region=us-east-1",
			S3AccessKeyID:     "key",
			S3SecretAccessKey: "secret",
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestOpenLocalURL(t *testing.T) {
	dir := t.TempDir()
	s, err := blob.Open(context.Background(), blob.Config{URL: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(*blob.Local).Root(); got != dir {
		t.Errorf("root %s, want %s", got, dir)
	}
	if _, err := blob.Open(context.Background(), blob.Config{URL: "ftp://x"}); err == nil {
		t.Error("ftp URL accepted")
	}
}
