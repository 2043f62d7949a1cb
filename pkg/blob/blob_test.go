package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/minio/minio-go/v7"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/archivist/archivist/devkit/blobtest"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
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

// TestMain stops the MinIO server the tests started.
func TestMain(m *testing.M) { testenv.Main(m) }

var buckets atomic.Int32

// TestS3 runs the suite against the S3 stand-in (blobtest.S3: gofakes3
// answering as AWS does): real HTTP, real S3 requests, no mock of the
// interface.
func TestS3(t *testing.T) {
	s3 := blobtest.NewS3(t, blobtest.S3Options{})
	blobtest.Run(t, func(t *testing.T) blob.Store {
		return s3.Bucket(t, fmt.Sprintf("bucket-%d", buckets.Add(1)), "archive")
	})
}

// TestS3OnMinIO runs the suite against a real S3 server, MinIO, started
// from the machine's binary (.ci/run builds it).
func TestS3OnMinIO(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, _ := testenv.MinIOBucket(t, "archive")
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

// TestS3ProviderChecksum: the checksum an S3 store reports is the one S3
// computed: SHA-256 on a single put, a full-object CRC-64/NVME on a
// multipart upload; for an object stored without one, its ETag only when
// that is an MD5 of the content (never a multipart or an SSE-KMS ETag);
// and bytes that rot behind the provider's back leave it as it was.
func TestS3ProviderChecksum(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 17<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, kms := range []bool{false, true} {
		s3 := blobtest.NewS3(t, blobtest.S3Options{KMS: kms})
		bucket := fmt.Sprintf("sums-%t", kms)
		s := s3.Bucket(t, bucket, "")
		checkProviderChecksums(t, s, s3.Client(t, ""), bucket, kms, data)
		stat := func(key string) blob.Checksum {
			t.Helper()
			info, err := s.Stat(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return info.Checksum
		}
		before := stat("single")
		s3.Rot(t, bucket, "single", func(b []byte) { b[12345] ^= 0xff })
		if after := stat("single"); after != before {
			t.Errorf("kms %t: rot changed the provider's checksum: %v, was %v", kms, after, before)
		}
	}
}

// TestS3ProviderChecksumOnMinIO: the same on a real S3 server (MinIO,
// unencrypted): a single put's SHA-256, a multipart upload's full-object
// CRC-64/NVME, another client's single put's MD5 ETag, a multipart ETag
// read as no digest. (Rot behind the provider's back is shown on the
// stand-in alone: MinIO cannot be made to show it.)
func TestS3ProviderChecksumOnMinIO(t *testing.T) {
	data := make([]byte, 17<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	s, bucket := testenv.MinIOBucket(t, "")
	raw, err := testenv.MinIO(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	checkProviderChecksums(t, s, raw, bucket, false, data)
}

// checkProviderChecksums checks the checksums store s (on bucket, which
// raw writes behind its back) reports: see TestS3ProviderChecksum.
func checkProviderChecksums(t *testing.T, s blob.Store, raw *minio.Client, bucket string, kms bool, data []byte) {
	t.Helper()
	ctx := context.Background()
	digest := func(algo string, b []byte) string {
		h := blob.NewHash(algo)
		h.Write(b)
		return hex.EncodeToString(h.Sum(nil))
	}
	put := func(key string, r io.Reader) blob.Checksum {
		t.Helper()
		info, err := s.Put(ctx, key, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		return info.Checksum
	}
	stat := func(key string) blob.Checksum {
		t.Helper()
		info, err := s.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return info.Checksum
	}
	if got, want := put("single", bytes.NewReader(data)), (blob.Checksum{Algorithm: "sha256", Value: digest("sha256", data)}); got != want {
		t.Errorf("kms %t: a single put's checksum %v, want %v", kms, got, want)
	}
	if got, want := stat("single"), (blob.Checksum{Algorithm: "sha256", Value: digest("sha256", data)}); got != want {
		t.Errorf("kms %t: a single put's checksum as stated %v, want %v", kms, got, want)
	}
	if got, want := put("multipart", io.MultiReader(bytes.NewReader(data))), (blob.Checksum{Algorithm: "crc64nvme", Value: digest("crc64nvme", data)}); got != want {
		t.Errorf("kms %t: a multipart put's checksum %v, want %v", kms, got, want)
	}
	if got, want := stat("multipart"), (blob.Checksum{Algorithm: "crc64nvme", Value: digest("crc64nvme", data)}); got != want {
		t.Errorf("kms %t: a multipart put's checksum as stated %v, want %v", kms, got, want)
	}
	// Written by another client that asked for no checksum.
	if _, err := raw.PutObject(ctx, bucket, "old-small", bytes.NewReader(data[:1000]), 1000, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.PutObject(ctx, bucket, "old-large", io.MultiReader(bytes.NewReader(data)), -1, minio.PutObjectOptions{PartSize: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	small, large := stat("old-small"), stat("old-large")
	if kms && small.Digests() {
		t.Errorf("an SSE-KMS ETag read as a digest: %v", small)
	}
	if !kms && small != (blob.Checksum{Algorithm: "md5", Value: digest("md5", data[:1000])}) {
		t.Errorf("a single unencrypted put's ETag: %v, want its md5", small)
	}
	if large.Digests() && large.Algorithm != "crc64nvme" {
		t.Errorf("kms %t: a multipart ETag read as a digest: %v", kms, large)
	}
}

// TestS3AddChecksum: an object stored without a checksum of S3's own gets
// one by a copy onto itself, its content and metadata unchanged: the
// migration of objects stored before Archivist asked for checksums.
func TestS3AddChecksum(t *testing.T) {
	s3 := blobtest.NewS3(t, blobtest.S3Options{})
	checkAddChecksum(t, s3.Bucket(t, "migrate", ""), s3.Client(t, ""), "migrate")
}

// TestS3AddChecksumOnMinIO is TestS3AddChecksum on a real S3 server.
func TestS3AddChecksumOnMinIO(t *testing.T) {
	s, bucket := testenv.MinIOBucket(t, "")
	raw, err := testenv.MinIO(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	checkAddChecksum(t, s, raw, bucket)
}

// checkAddChecksum: see TestS3AddChecksum.
func checkAddChecksum(t *testing.T, s blob.Store, raw *minio.Client, bucket string) {
	t.Helper()
	ctx := context.Background()
	data := bytes.Repeat([]byte("old object "), 2<<20) // 22 MiB, multipart
	if _, err := raw.PutObject(ctx, bucket, "old", io.MultiReader(bytes.NewReader(data)), -1,
		minio.PutObjectOptions{PartSize: 16 << 20, ContentType: "text/plain", UserMetadata: map[string]string{"note": "kept"}}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Stat(ctx, "old")
	if err != nil || before.Checksum.Digests() {
		t.Fatalf("before: %+v (%v), want no checksum of S3's own", before, err)
	}
	after, err := blob.AddChecksum(ctx, s, "old")
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(data)
	if after.Checksum != (blob.Checksum{Algorithm: "sha256", Value: hex.EncodeToString(d[:])}) {
		t.Errorf("after: checksum %v, want the content's sha256", after.Checksum)
	}
	if after.Size != int64(len(data)) || after.Properties["note"] != "kept" || after.Properties["content-type"] != "text/plain" {
		t.Errorf("after: size %d, properties %v; want the object as it was", after.Size, after.Properties)
	}
	rc, _, err := s.Get(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Error("the copy changed the content")
	}
}

// TestS3StandInWritesAreAtomic: the stand-in records what S3 says of an
// object (ETag, checksum) beside gofakes3's bytes; two puts of one key
// must not leave the bytes of one with the checksum of the other, as S3
// never does (a flake of ConcurrentPutsOfOneKey, once in four runs).
func TestS3StandInWritesAreAtomic(t *testing.T) {
	ctx := context.Background()
	s := blobtest.NewS3(t, blobtest.S3Options{}).Bucket(t, "atomic", "")
	bodies := []string{strings.Repeat("a", 1<<14), strings.Repeat("b", 1<<15)}
	for round := range 500 {
		key := fmt.Sprintf("k%d", round)
		var wg sync.WaitGroup
		for _, b := range bodies {
			wg.Go(func() {
				if _, err := s.Put(ctx, key, strings.NewReader(b), nil); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		info, err := s.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		for _, b := range bodies {
			if int64(len(b)) == info.Size {
				d := sha256.Sum256([]byte(b))
				want = hex.EncodeToString(d[:])
			}
		}
		if info.Checksum.Value != want {
			t.Fatalf("round %d: %d bytes with checksum %s of the other put", round, info.Size, info.Checksum)
		}
	}
}

// TestMakeBucketOnMinIO: the bucket an s3:// URL names is made, once
// (again: nothing), and a store opens on it (compose's first start).
func TestMakeBucketOnMinIO(t *testing.T) {
	ctx := context.Background()
	m := testenv.MinIO(t)
	cfg := blob.Config{URL: m.URL("made-by-makebucket", ""), S3AccessKeyID: m.AccessKey, S3SecretAccessKey: m.SecretKey}
	if _, err := blob.Open(ctx, cfg); err == nil {
		t.Fatal("a store opened on a bucket not made yet")
	}
	for range 2 {
		if err := blob.MakeBucket(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := blob.Open(ctx, cfg); err != nil {
		t.Errorf("the bucket made: %v", err)
	}
}
