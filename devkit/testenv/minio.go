package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/archivist/archivist/devkit/freeport"
	"github.com/archivist/archivist/devkit/minioserver"
	"github.com/archivist/archivist/pkg/blob"
)

var (
	minioMu  sync.Mutex
	minioSrv *minioserver.Server
	minioDir string
	minioSeq atomic.Int64
	// minioRelease frees the server's ports.
	minioRelease []func()
)

// MinIO returns the process's MinIO server (a real S3 server, started from
// the machine's binary on first use and stopped by Main). A machine
// without the binary fails the test, saying how to build it.
func MinIO(t testing.TB) *minioserver.Server {
	t.Helper()
	minioMu.Lock()
	defer minioMu.Unlock()
	if minioSrv != nil {
		return minioSrv
	}
	dir, err := os.MkdirTemp("", "archivist-minio-")
	if err != nil {
		t.Fatalf("testenv: minio dir: %v", err)
	}
	// Its ports are the process's, as the server is, until Main ends.
	var ports [2]int
	for i := range ports {
		p, release, err := freeport.Take()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		ports[i], minioRelease = p, append(minioRelease, release)
	}
	s, err := minioserver.Start(context.Background(), minioserver.Options{Dir: filepath.Join(dir, "data"),
		Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), ConsoleAddr: fmt.Sprintf("127.0.0.1:%d", ports[1])})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("testenv: MinIO is needed here (the S3 tests run on a real S3 server): %v", err)
	}
	minioSrv, minioDir = s, dir
	return s
}

// MinIOBucket makes a bucket of the test's own on the process's MinIO
// server and opens a blob store on it (under prefix, which may be empty);
// it returns the store and the bucket's name.
func MinIOBucket(t testing.TB, prefix string) (blob.Store, string) {
	t.Helper()
	s := MinIO(t)
	bucket := fmt.Sprintf("t%d-%d", os.Getpid(), minioSeq.Add(1))
	ctx := context.Background()
	if err := s.MakeBucket(ctx, bucket); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	st, err := blob.Open(ctx, blob.Config{URL: s.URL(bucket, prefix), S3AccessKeyID: s.AccessKey, S3SecretAccessKey: s.SecretKey})
	if err != nil {
		t.Fatalf("testenv: open bucket %s: %v", bucket, err)
	}
	return st, bucket
}

// shutdownMinIO stops the process's MinIO server and removes its files.
func shutdownMinIO() {
	minioMu.Lock()
	defer minioMu.Unlock()
	if minioSrv != nil {
		_ = minioSrv.Stop()
		os.RemoveAll(minioDir)
		minioSrv = nil
	}
	for _, r := range minioRelease {
		r()
	}
	minioRelease = nil
}
