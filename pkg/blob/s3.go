package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"regexp"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configures an S3-compatible store.
type S3Options struct {
	// Endpoint is host:port of the S3 API (e.g. s3.amazonaws.com).
	Endpoint string
	// Bucket holds the objects; it must exist.
	Bucket string
	// Prefix is prepended to every key ("archive/" say); may be empty.
	Prefix string
	// Region of the bucket (optional).
	Region string
	// AccessKey and SecretKey are static credentials. Empty, the credentials
	// come from the platform's chain (s3Credentials): AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, MINIO_ROOT_USER and its password, the AWS
	// shared credentials file, then IAM: a web identity (EKS IRSA:
	// AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), container credentials
	// (EKS Pod Identity, ECS), the instance's role; none gives anonymous
	// access.
	AccessKey string
	// SecretKey is the secret half of the credentials.
	SecretKey string
	// Secure uses https.
	Secure bool
	// PathStyle forces path-style bucket addressing (most S3-compatible servers).
	PathStyle bool
	// STSEndpoint is the security token service a web identity is
	// exchanged at (default: AWS's regional STS); for a private STS such as
	// MinIO's.
	STSEndpoint string
}

// s3Credentials are o's static keys if it has them, else the platform's
// credentials chain (see S3Options.AccessKey).
func s3Credentials(o S3Options) *credentials.Credentials {
	if o.AccessKey != "" || o.SecretKey != "" {
		return credentials.NewStaticV4(o.AccessKey, o.SecretKey, "")
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.EnvMinio{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Endpoint: o.STSEndpoint},
	})
}

// S3 is a blob store in an S3-compatible bucket. Its checksum is the
// object's ETag: the MD5 of the content for a single-part upload; for a
// multipart one, whose ETag digests nothing, the SHA-256 its put stated
// (PropSHA256), when it did.
type S3 struct {
	c      *minio.Client
	bucket string
	prefix string
}

// NewS3 opens a bucket and checks that it exists.
func NewS3(ctx context.Context, o S3Options) (*S3, error) {
	if o.Endpoint == "" || o.Bucket == "" {
		return nil, errors.New("s3 blob store needs an endpoint and a bucket")
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(o.Endpoint, &minio.Options{
		Creds:        s3Credentials(o),
		Secure:       o.Secure,
		Region:       o.Region,
		BucketLookup: lookup,
		// A few quick retries ride out a dropped connection; a longer
		// trouble is an outage the services pause for (pkg/fault), not
		// something to retry inside one call for many seconds.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", o.Endpoint, err)
	}
	ok, err := c.BucketExists(ctx, o.Bucket)
	if err != nil {
		return nil, fmt.Errorf("s3 bucket %s at %s: %w", o.Bucket, o.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("s3 bucket %s does not exist at %s", o.Bucket, o.Endpoint)
	}
	prefix := o.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{c: c, bucket: o.Bucket, prefix: prefix}, nil
}

var md5Hex = regexp.MustCompile(`^[0-9a-f]{32}$`)

func etagChecksum(etag string) Checksum {
	etag = strings.Trim(strings.ToLower(etag), `"`)
	if md5Hex.MatchString(etag) {
		return Checksum{Algorithm: "md5", Value: etag}
	}
	return Checksum{Algorithm: "s3-etag", Value: etag}
}

// metaSHA256 is the user metadata holding a put's stated SHA-256.
const metaSHA256 = "archivist-sha256"

func (s *S3) info(oi minio.ObjectInfo) Info {
	sum := etagChecksum(oi.ETag)
	var props map[string]string
	if len(oi.UserMetadata) > 0 || (oi.ContentType != "" && oi.ContentType != "binary/octet-stream" && oi.ContentType != "application/octet-stream") {
		props = make(map[string]string, len(oi.UserMetadata)+1)
		for k, v := range oi.UserMetadata {
			name := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(k, "X-Amz-Meta-"), "x-amz-meta-"))
			if name == metaSHA256 {
				if sum.Algorithm != "md5" {
					sum = Checksum{Algorithm: "sha256", Value: strings.ToLower(v)}
				}
				continue
			}
			props[name] = v
		}
		if oi.ContentType != "" && oi.ContentType != "binary/octet-stream" && oi.ContentType != "application/octet-stream" {
			props["content-type"] = oi.ContentType
		}
		if len(props) == 0 {
			props = nil
		}
	}
	return Info{Key: strings.TrimPrefix(oi.Key, s.prefix), Size: oi.Size, Checksum: sum,
		Modified: oi.LastModified.UTC(), Properties: props}
}

// s3Fault marks an error of the endpoint itself (unreachable, refusing,
// failing with a 5xx or throttling) as an outage of the blob store: no
// object's fault. An error about the request (403, 400, ...) stays as it is.
func s3Fault(err error) error {
	if err == nil {
		return nil
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.StatusCode >= 500, resp.Code == "SlowDown", resp.Code == "ServiceUnavailable", resp.Code == "RequestTimeout":
		return fault.Outage(fault.BlobStore, err)
	case resp.StatusCode == 0 && fault.IsNetwork(err):
		return fault.Outage(fault.BlobStore, err)
	}
	return err
}

func notFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NotFound"
}

// s3PartSize is the part of a multipart upload: a put of unknown length
// holds one part in memory (8 at once fit a curator's memory, where 64 MiB
// parts did not), and 10,000 parts reach 156 GiB, beyond the largest file
// ingest takes (INGEST_MAX_FILE_BYTES, 100 GiB).
const s3PartSize = 16 << 20

// readerSize is r's length when it is a file or an in-memory reader, so
// that the upload reads the parts from it instead of buffering them (and a
// small object goes in one request, with an MD5 ETag the auditor can
// compare); -1 when unknown.
func readerSize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Stat() (fs.FileInfo, error) }:
		if st, err := v.Stat(); err == nil && st.Mode().IsRegular() {
			// A file read from its start only: the upload reads a file's
			// parts at their offsets (io.ReaderAt), from 0.
			if sk, ok := r.(io.Seeker); ok {
				if off, err := sk.Seek(0, io.SeekCurrent); err == nil && off == 0 {
					return st.Size()
				}
			}
		}
	case interface{ Len() int }:
		return int64(v.Len())
	}
	return -1
}

// Put implements Store. The payload is sent unsigned (as over TLS every
// client does): S3-compatible servers differ in their support of streaming
// signatures, and the ETag checks what arrived.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	want, props := takeSHA256(props)
	opts := minio.PutObjectOptions{PartSize: s3PartSize, DisableContentSha256: true}
	if want != "" {
		// Kept beside a multipart ETag, which digests nothing (info).
		opts.UserMetadata = map[string]string{metaSHA256: want}
	}
	for k, v := range props {
		if strings.EqualFold(k, "content-type") {
			opts.ContentType = v
			continue
		}
		if opts.UserMetadata == nil {
			opts.UserMetadata = map[string]string{}
		}
		opts.UserMetadata[k] = v
	}
	if _, err := s.c.PutObject(ctx, s.bucket, s.prefix+key, r, readerSize(r), opts); err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, s3Fault(err))
	}
	// Report what the store now says of the object, as Stat will.
	return s.Stat(ctx, key)
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	obj, err := s.c.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("get %s: %w", key, s3Fault(err))
	}
	return obj, info, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	oi, err := s.c.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if notFound(err) {
		return Info{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, s3Fault(err))
	}
	return s.info(oi), nil
}

// List implements Store. User properties are not part of a listing; Stat
// an object for them.
func (s *S3) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		for oi := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
			if oi.Err != nil {
				yield(Info{}, fmt.Errorf("list %q: %w", prefix, s3Fault(oi.Err)))
				return
			}
			if !yield(s.info(oi), nil) {
				return
			}
		}
	}
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil && !notFound(err) {
		return fmt.Errorf("delete %s: %w", key, s3Fault(err))
	}
	return nil
}
