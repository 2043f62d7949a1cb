package dev_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/archivist/dev"
	"github.com/archivist/archivist/services/curator/ingest/origin"
)

// TestDevOnMinIO (#49): `archivist dev --minio` runs every pipeline on a
// real S3 server with the archive's second copy: a deposited file appears
// in both buckets; its bytes replaced in the archive's bucket by a plain
// S3 client are found at the next check and repaired from the copy; a
// file deleted from the copy's bucket is found in the copy's own cycle and
// copied back.
func TestDevOnMinIO(t *testing.T) {
	o := devOptions(t)
	o.MinIO, o.MinIOPort = true, testenv.FreePort(t)
	// The second copy's cycle in seconds, for the test.
	t.Setenv("AUDITOR_SECONDARY_CYCLE", "3s")
	t.Setenv("AUDITOR_SCHEDULE_TICK", "200ms")
	testenv.FreePort(t) // the console's, the next one, is most likely free too
	runDev(t, o)
	token, err := os.ReadFile(filepath.Join(o.DataDir, dev.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	api := demoAPI{t: t, token: strings.TrimSpace(string(token))}
	creds, err := os.ReadFile(filepath.Join(o.DataDir, "minio", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	access, secret, _ := strings.Cut(strings.TrimSpace(string(creds)), " ")
	raw, err := minio.New(fmt.Sprintf("127.0.0.1:%d", o.MinIOPort), &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""),
		BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func(bucket, key string) string {
		obj, err := raw.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return ""
		}
		defer obj.Close()
		b, _ := io.ReadAll(obj)
		return string(b)
	}

	org := origin.New(nil)
	srv := httptest.NewServer(org)
	defer srv.Close()
	const content = "a page deposited on MinIO"
	org.Add("/page.txt", []byte(content))
	var made struct{ Batch int64 }
	if code := api.call("POST", "http://"+o.CuratorAddr+"/v1/batches", map[string]string{"profile": "demo", "type": "file",
		"payload_url": srv.URL + "/page.txt", "primary": "ark:/13030/onminio"}, &made); code != http.StatusCreated {
		t.Fatalf("deposit: %d", code)
	}
	// The stored file's key, once the batch completes.
	var key string
	api.waitFor("the deposit stored", func() bool {
		for info := range raw.ListObjects(ctx, dev.MinIOArchiveBucket, minio.ListObjectsOptions{Prefix: "objects/", Recursive: true}) {
			if strings.HasSuffix(info.Key, "/producer/page.txt") {
				key = info.Key
			}
		}
		return key != ""
	})
	api.waitFor("the file in the second copy", func() bool { return read(dev.MinIOCopyBucket, key) == content })

	if _, err := raw.PutObject(ctx, dev.MinIOArchiveBucket, key, strings.NewReader("replaced behind the archive's back"), -1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := api.call("POST", "http://"+o.AuditorAddr+"/v1/audit/check", map[string]string{"object": key}, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("check: %d", code)
	}
	api.waitFor("the archive's bucket repaired from the copy", func() bool { return read(dev.MinIOArchiveBucket, key) == content })

	// A file deleted from the second copy is found in its cycle and copied
	// back.
	if err := raw.RemoveObject(ctx, dev.MinIOCopyBucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	api.waitFor("the second copy's file copied back", func() bool { return read(dev.MinIOCopyBucket, key) == content })
}
