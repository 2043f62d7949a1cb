package integrity_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/archivist/archivist/devkit/blobtest"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestRotOnS3IsNeverAnUpdate: a 17 MiB object whose put stated no sha256
// rots behind the provider's back. Whatever S3 keeps of it (its own
// SHA-256 or CRC-64/NVME, or, stored before Archivist asked for one, only
// an ETag that digests nothing: multipart, or SSE-KMS), the check says the
// content went sour (row 2) on every attempt, never "updated at the
// provider" (row 10, which captured the rotted bytes as the truth), and
// opens a resolution task; nothing is queued for capture.
func TestRotOnS3IsNeverAnUpdate(t *testing.T) {
	ctx := context.Background()
	good := make([]byte, 17<<20)
	rand.Read(good)
	digest := sha256.Sum256(good)
	sum := hex.EncodeToString(digest[:])
	cases := []struct {
		name     string
		kms      bool
		put      func(store blob.Store, raw *minio.Client, bucket string) error
		provider string
	}{
		{"single put, S3's sha256", false, func(store blob.Store, _ *minio.Client, _ string) error {
			_, err := store.Put(ctx, obj, bytes.NewReader(good), nil)
			return err
		}, "sha256"},
		{"multipart put, S3's crc64nvme", false, func(store blob.Store, _ *minio.Client, _ string) error {
			_, err := store.Put(ctx, obj, io.MultiReader(bytes.NewReader(good)), nil)
			return err
		}, "crc64nvme"},
		{"stored before checksums, multipart ETag", false, func(_ blob.Store, raw *minio.Client, bucket string) error {
			_, err := raw.PutObject(ctx, bucket, obj, io.MultiReader(bytes.NewReader(good)), -1, minio.PutObjectOptions{PartSize: 16 << 20})
			return err
		}, "s3-etag"},
		{"stored before checksums, SSE-KMS ETag", true, func(_ blob.Store, raw *minio.Client, bucket string) error {
			_, err := raw.PutObject(ctx, bucket, obj, bytes.NewReader(good[:1<<20]), 1<<20, minio.PutObjectOptions{})
			return err
		}, "s3-etag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s3 := blobtest.NewS3(t, blobtest.S3Options{KMS: c.kms})
			store := s3.Bucket(t, "audit", "")
			if err := c.put(store, s3.Client(t, ""), "audit"); err != nil {
				t.Fatal(err)
			}
			info, err := store.Stat(ctx, obj)
			if err != nil {
				t.Fatal(err)
			}
			if info.Checksum.Algorithm != c.provider {
				t.Fatalf("the provider's checksum %v, want %s", info.Checksum, c.provider)
			}
			want := sum
			if c.kms {
				d := sha256.Sum256(good[:1<<20])
				want = hex.EncodeToString(d[:])
			}
			db := testenv.DB(t, migrations.Schema)
			for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
				`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
				if _, err := db.Exec(ctx, q, obj, want, info.Size); err != nil {
					t.Fatal(err)
				}
			}
			s3.Rot(t, "audit", obj, func(b []byte) { b[12345] ^= 0xff })
			checker := integrity.New(db, store, nil)
			for attempt := 1; attempt <= 3; attempt++ {
				res, err := checker.Check(ctx, obj, false, attempt, 3)
				if err != nil && !errors.Is(err, integrity.ErrRetryLater) {
					t.Fatal(err)
				}
				if !res.Matched || res.Row.No != 2 {
					t.Fatalf("attempt %d: matched row %d (%v), want 2 (content went sour); observed %+v", attempt, res.Row.No, res.Matched, res.Observation)
				}
			}
			var tasks, queued int
			var indexed string
			if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM auditor.resolution_tasks WHERE object = $1 AND state = 'open'),
				(SELECT count(*) FROM auditor.audit_queue WHERE object = $1),
				(SELECT checksum FROM auditor.content_index WHERE object = $1)`, obj).Scan(&tasks, &queued, &indexed); err != nil {
				t.Fatal(err)
			}
			if tasks != 1 || queued != 0 || indexed != want {
				t.Errorf("resolution tasks %d (want 1), queued for capture %d (want 0), content index %s (want %s)", tasks, queued, indexed, want)
			}
		})
	}
}

// TestHealthyObjectOnAnSSEKMSBucket: an SSE-KMS ETag is no MD5; read as one,
// every healthy object stored without a provider checksum matched row 3
// ("the provider's checksum process failed").
func TestHealthyObjectOnAnSSEKMSBucket(t *testing.T) {
	ctx := context.Background()
	s3 := blobtest.NewS3(t, blobtest.S3Options{KMS: true})
	store := s3.Bucket(t, "audit", "")
	data := []byte("a small healthy object on an encrypted bucket")
	if _, err := s3.Client(t, "").PutObject(ctx, "audit", obj, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(data)
	db := testenv.DB(t, migrations.Schema)
	for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
		`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
		if _, err := db.Exec(ctx, q, obj, hex.EncodeToString(d[:]), len(data)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := integrity.New(db, store, nil).Check(ctx, obj, true, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched || res.Row.No != 1 || res.Observation.Provider.State != integrity.NA {
		t.Fatalf("matched row %d (%v), provider %s; want row 1 with the provider n/a", res.Row.No, res.Matched, res.Observation.Provider.State)
	}
}

// TestObjectsStoredBeforeChecksumsGetOne: the migration of objects stored
// before Archivist asked S3 for checksums. A full check that reads such an
// object's content as the archive recorded it has S3 add a SHA-256 of its
// own (and records it); one whose content differs is not given one (its
// rot would become the provider's word). Once added, rot is told by the
// provider as well.
func TestObjectsStoredBeforeChecksumsGetOne(t *testing.T) {
	ctx := context.Background()
	s3 := blobtest.NewS3(t, blobtest.S3Options{})
	store := s3.Bucket(t, "audit", "")
	raw := s3.Client(t, "")
	good := make([]byte, 17<<20)
	rand.Read(good)
	d := sha256.Sum256(good)
	sum := hex.EncodeToString(d[:])
	db := testenv.DB(t, migrations.Schema)
	for _, key := range []string{"objects/healthy", "objects/rotted"} {
		if _, err := raw.PutObject(ctx, "audit", key, io.MultiReader(bytes.NewReader(good)), -1, minio.PutObjectOptions{PartSize: 16 << 20}); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
			`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
			if _, err := db.Exec(ctx, q, key, sum, len(good)); err != nil {
				t.Fatal(err)
			}
		}
	}
	s3.Rot(t, "audit", "objects/rotted", func(b []byte) { b[7] ^= 0x10 })
	checker := integrity.New(db, store, nil)
	check := func(key string, want int) {
		t.Helper()
		res, err := checker.Check(ctx, key, false, 3, 3)
		if err != nil || res.ProviderChecksumErr != nil {
			t.Fatalf("%s: %v / %v", key, err, res.ProviderChecksumErr)
		}
		if res.Row.No != want {
			t.Fatalf("%s: row %d, want %d; observed %+v", key, res.Row.No, want, res.Observation)
		}
	}
	check("objects/healthy", 1)
	check("objects/rotted", 2)
	states := map[string]string{}
	rows, _ := db.Query(ctx, `SELECT object, state FROM auditor.provider_checksums`)
	for rows.Next() {
		var o, s string
		rows.Scan(&o, &s)
		states[o] = s
	}
	rows.Close()
	if len(states) != 1 || states["objects/healthy"] != "added" {
		t.Errorf("provider checksums recorded %v, want the healthy object's added only", states)
	}
	for key, want := range map[string]string{"objects/healthy": "sha256", "objects/rotted": "s3-etag"} {
		if info, err := store.Stat(ctx, key); err != nil || info.Checksum.Algorithm != want {
			t.Errorf("%s: provider checksum %v (%v), want %s", key, info.Checksum, err, want)
		}
	}
	s3.Rot(t, "audit", "objects/healthy", func(b []byte) { b[7] ^= 0x10 })
	res, err := checker.Check(ctx, "objects/healthy", false, 1, 3)
	if err != nil || res.Row.No != 2 || res.Observation.Provider.State != integrity.OK {
		t.Errorf("rot after the migration: row %d, provider %s (%v); want row 2 with the provider agreeing with the record", res.Row.No, res.Observation.Provider.State, err)
	}
}
