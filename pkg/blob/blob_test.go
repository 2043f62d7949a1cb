package blob_test

import (
	"context"
	"fmt"
	"net/http/httptest"
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
