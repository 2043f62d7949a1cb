package blob_test

import (
	"context"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func makeBucket(ctx context.Context, endpoint, bucket string) error {
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4("key", "secret", ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		return err
	}
	return c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"})
}
