package integrity_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/testenv"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
)

type multipartETags struct{ next http.Handler }

func (m multipartETags) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodHead && r.Method != http.MethodGet {
		m.next.ServeHTTP(w, r) // parts keep their own ETags
		return
	}
	ew := &etagWriter{ResponseWriter: w}
	m.next.ServeHTTP(ew, r)
	if !ew.wrote { // a HEAD answered with headers only
		ew.WriteHeader(http.StatusOK)
	}
}

type etagWriter struct {
	http.ResponseWriter
	wrote bool
}

func (e *etagWriter) WriteHeader(code int) {
	if !e.wrote {
		e.wrote = true
		if et := e.Header().Get("ETag"); et != "" {
			e.Header().Set("ETag", `"`+strings.Trim(et, `"`)+`-2"`)
		}
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *etagWriter) Write(b []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusOK)
	}
	return e.ResponseWriter.Write(b)
}

// TestRow2ContentWentSourOnS3: on S3 a large object's ETag is a multipart
// one, which digests nothing; with the SHA-256 its put stated, the audit
// still tells content gone sour (row 2) from an update at the provider
// (row 10, what it used to say).
func TestRow2ContentWentSourOnS3(t *testing.T) {
	ctx := context.Background()
	// AWS S3 gives a multipart upload an ETag that is no digest of the
	// content ("<md5 of the parts' md5s>-<parts>"); gofakes3 gives an MD5,
	// so its answers are made AWS's.
	srv := httptest.NewServer(multipartETags{gofakes3.New(s3mem.New()).Server()})
	defer srv.Close()
	endpoint := strings.TrimPrefix(srv.URL, "http://")
	raw, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4("key", "secret", ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.MakeBucket(ctx, "audit", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(ctx, blob.Config{URL: "s3://audit/?endpoint=" + endpoint + "&secure=false&path_style=true&region=us-east-1",
		S3AccessKeyID: "key", S3SecretAccessKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	good := make([]byte, 17<<20) // beyond one part: a multipart upload
	rand.Read(good)
	digest := sha256.Sum256(good)
	sum := hex.EncodeToString(digest[:])
	info, err := store.Put(ctx, obj, bytes.NewReader(good), map[string]string{blob.PropSHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	if info.Checksum.Algorithm != "sha256" || info.Checksum.Value != sum {
		t.Fatalf("the store's checksum of a multipart object: %v, want the stated sha256", info.Checksum)
	}
	db := testenv.DB(t, migrations.Schema)
	for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
		`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
		if _, err := db.Exec(ctx, q, obj, sum, len(good)); err != nil {
			t.Fatal(err)
		}
	}
	// The bytes rot behind the store's back; what it says of them (its
	// metadata, a multipart ETag) stays.
	before, err := raw.StatObject(ctx, "audit", obj, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	for k, v := range before.UserMetadata {
		meta[strings.TrimPrefix(k, "X-Amz-Meta-")] = v
	}
	sour := bytes.Clone(good)
	sour[12345] ^= 0xff
	if _, err := raw.PutObject(ctx, "audit", obj, bytes.NewReader(sour), -1,
		minio.PutObjectOptions{PartSize: 16 << 20, UserMetadata: meta}); err != nil {
		t.Fatal(err)
	}
	res, err := integrity.New(db, store, nil).Check(ctx, obj, false, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched || res.Row.No != 2 {
		t.Fatalf("matched row %d (%v), want 2 (content went sour); observed %+v", res.Row.No, res.Matched, res.Observation)
	}
}
