package blob

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"regexp"
	"strings"

	"github.com/minio/crc64nvme"
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

// S3 is a blob store in an S3-compatible bucket. Its checksum is the one
// S3 computes and keeps itself: every put asks for a full-object checksum
// (SHA-256 on a single put, which is every object of a known size up to
// 5 GiB; CRC-64/NVME on a multipart upload, for which S3 offers no
// full-object SHA-256), and Stat reads it back. An object stored without
// one (before Archivist asked, or by another writer) falls back to its ETag
// when that is an MD5 of the content (a single, unencrypted put), and else
// has none: a multipart or SSE-KMS/SSE-C ETag digests nothing.
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
		// Checksums sent after the payload (aws-chunked trailers), so a
		// put streams: S3 checks them and keeps them.
		TrailingHeaders: true,
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

// checksum is what S3 says the object's content digests to: its own
// full-object checksum, else an ETag that is an MD5, else nothing
// ("s3-etag": the ETag as it is, which digests no content).
func checksum(oi minio.ObjectInfo) Checksum {
	if oi.ChecksumMode != "COMPOSITE" {
		if v, ok := b64Hex(oi.ChecksumSHA256); ok {
			return Checksum{Algorithm: "sha256", Value: v}
		}
	}
	if v, ok := b64Hex(oi.ChecksumCRC64NVME); ok {
		return Checksum{Algorithm: "crc64nvme", Value: v}
	}
	etag := strings.Trim(strings.ToLower(oi.ETag), `"`)
	sse := strings.ToLower(oi.Metadata.Get("X-Amz-Server-Side-Encryption"))
	encrypted := strings.HasPrefix(sse, "aws:kms") || oi.Metadata.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") != ""
	if md5Hex.MatchString(etag) && !encrypted {
		return Checksum{Algorithm: "md5", Value: etag}
	}
	return Checksum{Algorithm: "s3-etag", Value: etag}
}

// b64Hex turns S3's base64 checksum into hex; false if it is none (absent,
// or a composite "...-N").
func b64Hex(v string) (string, bool) {
	if v == "" || strings.Contains(v, "-") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return "", false
	}
	return hex.EncodeToString(raw), true
}

func (s *S3) info(oi minio.ObjectInfo) Info {
	var props map[string]string
	if len(oi.UserMetadata) > 0 || (oi.ContentType != "" && oi.ContentType != "binary/octet-stream" && oi.ContentType != "application/octet-stream") {
		props = make(map[string]string, len(oi.UserMetadata)+1)
		for k, v := range oi.UserMetadata {
			name := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(k, "X-Amz-Meta-"), "x-amz-meta-"))
			if name == legacySHA256 {
				continue // what an old put stated: not the provider's
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
	return Info{Key: strings.TrimPrefix(oi.Key, s.prefix), Size: oi.Size, Checksum: checksum(oi),
		Modified: oi.LastModified.UTC(), Properties: props}
}

// legacySHA256 is the user metadata in which puts before provider
// checksums kept their stated SHA-256: a claim of the writer's, not a
// checksum of the provider's, and no longer read as one.
const legacySHA256 = "archivist-sha256"

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

// maxSinglePut is S3's largest single put.
const maxSinglePut = 5 << 30

// Put implements Store. The payload is sent unsigned (as over TLS every
// client does) with a checksum S3 checks and keeps: an object of a known
// size up to 5 GiB goes in one request with its SHA-256 (the stated one
// when the writer stated it, so S3 refuses different bytes and nothing is
// stored), a larger or unsized one as a multipart upload with a
// full-object CRC-64/NVME (its stated SHA-256 then checked here, and the
// object removed on a mismatch). Under ImmutablePrefix the put is
// conditional (If-None-Match: *): S3 refuses it where the key holds an
// object, which stays (ErrExists) unless its checksum is that of the same
// bytes (a retry), which answers the put.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error) {
	return s.put(ctx, key, r, props, !Immutable(key))
}

// restore is Restore's put: unconditional.
func (s *S3) restore(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error) {
	return s.put(ctx, key, r, props, true)
}

// put stores r at key; unless replace, only where the key holds nothing.
func (s *S3) put(ctx context.Context, key string, r io.Reader, props map[string]string, replace bool) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	want, props := takeSHA256(props)
	size := readerSize(r)
	opts := minio.PutObjectOptions{PartSize: s3PartSize, DisableContentSha256: true}
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
	var h hash.Hash
	single := size >= 0 && size <= maxSinglePut
	switch {
	case single && want != "":
		raw, err := hex.DecodeString(want)
		if err != nil || len(raw) != sha256.Size {
			return Info{}, fmt.Errorf("put %s: stated sha256 %q is not a SHA-256: %w", key, want, ErrChecksumMismatch)
		}
		if opts.UserMetadata == nil {
			opts.UserMetadata = map[string]string{}
		}
		opts.UserMetadata["x-amz-checksum-sha256"] = base64.StdEncoding.EncodeToString(raw)
		opts.DisableMultipart = true
	case single:
		opts.Checksum, opts.DisableMultipart = minio.ChecksumSHA256, true
	default:
		opts.Checksum = minio.ChecksumCRC64NVME
		if want != "" {
			h = sha256.New()
			r = io.TeeReader(r, h)
		}
	}
	// A conditional put tells a retry of the same bytes from other bytes,
	// when S3 refuses it, by their digests: read again from the start of a
	// file or buffer, or kept while a stream is sent (which would hide a
	// file's offsets from the multipart upload).
	var sent *sentDigests
	if !replace {
		opts.SetMatchETagExcept("*")
		if !single {
			// minio-go sends the condition with a multipart upload's start
			// but not its completion (which AWS checks; MinIO checks
			// both): a key that holds an object is refused before a byte
			// is sent, leaving a window as long as the upload.
			if _, err := s.stat(ctx, key); err == nil {
				sent := &sentDigests{sha: sha256.New(), crc: crc64nvme.New(), r: r}
				return s.held(ctx, key, sent)
			} else if !errors.Is(err, ErrNotFound) {
				return Info{}, fmt.Errorf("put %s: %w", key, err)
			}
		}
		sent = &sentDigests{sha: sha256.New(), crc: crc64nvme.New(), r: r}
		if sk, ok := r.(io.ReadSeeker); ok {
			if off, err := sk.Seek(0, io.SeekCurrent); err == nil {
				sent.r, sent.rewind = sectionFrom(sk, off), true
			}
		}
		if !sent.rewind {
			r = sent
		}
	}
	if _, err := s.c.PutObject(ctx, s.bucket, s.prefix+key, r, size, opts); err != nil {
		if code := minio.ToErrorResponse(err).Code; code == "BadDigest" || code == "XAmzContentChecksumMismatch" {
			return Info{}, fmt.Errorf("put %s: %w", key, ErrChecksumMismatch)
		}
		if sent != nil && preconditionFailed(err) {
			return s.held(ctx, key, sent)
		}
		return Info{}, fmt.Errorf("put %s: %w", key, s3Fault(err))
	}
	if h != nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			if err := s.Delete(ctx, key); err != nil {
				return Info{}, fmt.Errorf("put %s: sha256 %s, stated %s (%w), and its removal failed: %w", key, got, want, ErrChecksumMismatch, err)
			}
			return Info{}, fmt.Errorf("put %s: sha256 %s, stated %s: %w", key, got, want, ErrChecksumMismatch)
		}
	}
	// Report what the store now says of the object, as Stat will.
	return s.Stat(ctx, key)
}

// preconditionFailed reports whether S3 refused a conditional put because
// the key holds an object (412; 409 ConditionalRequestConflict while
// another conditional write of the key is under way).
func preconditionFailed(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == http.StatusPreconditionFailed || resp.Code == "PreconditionFailed" ||
		resp.Code == "ConditionalRequestConflict"
}

// held answers a conditional put S3 refused: the object the key holds when
// it has the bytes sent (read to their end here), else ErrExists.
func (s *S3) held(ctx context.Context, key string, sent *sentDigests) (Info, error) {
	if sent.rewind {
		if err := sent.r.(*seekFrom).reset(); err != nil {
			return Info{}, fmt.Errorf("put %s: read its content again: %w", key, err)
		}
	}
	if _, err := io.Copy(io.Discard, sent); err != nil {
		return Info{}, fmt.Errorf("put %s: read the rest of its content: %w", key, err)
	}
	info, err := s.Stat(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	var mine string
	switch info.Checksum.Algorithm {
	case "sha256":
		mine = hex.EncodeToString(sent.sha.Sum(nil))
	case "crc64nvme":
		mine = hex.EncodeToString(sent.crc.Sum(nil))
	}
	if mine != "" && mine == info.Checksum.Value && info.Size == sent.n {
		return info, nil
	}
	return Info{}, fmt.Errorf("put %s (%d bytes): it holds %d bytes, %s: %w", key, sent.n, info.Size, info.Checksum, ErrExists)
}

// sentDigests digests what a reader yields.
type sentDigests struct {
	sha, crc hash.Hash
	r        io.Reader
	n        int64
	// rewind: r is read again from the start of the put's content.
	rewind bool
}

// seekFrom reads a seekable source from an offset (where a put's content
// started).
type seekFrom struct {
	rs  io.ReadSeeker
	off int64
}

func sectionFrom(rs io.ReadSeeker, off int64) *seekFrom { return &seekFrom{rs, off} }

func (s *seekFrom) reset() error {
	_, err := s.rs.Seek(s.off, io.SeekStart)
	return err
}

func (s *seekFrom) Read(p []byte) (int, error) { return s.rs.Read(p) }

func (d *sentDigests) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.sha.Write(p[:n])
	d.crc.Write(p[:n])
	d.n += int64(n)
	return n, err
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
	oi, err := s.stat(ctx, key)
	if err != nil {
		return Info{}, err
	}
	return s.info(oi), nil
}

// stat is what S3 says of key, its checksum included.
func (s *S3) stat(ctx context.Context, key string) (minio.ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return minio.ObjectInfo{}, err
	}
	oi, err := s.c.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{Checksum: true})
	if notFound(err) {
		return oi, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return oi, fmt.Errorf("stat %s: %w", key, s3Fault(err))
	}
	return oi, nil
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

// AddChecksum has S3 compute and keep a full-object SHA-256 of an object
// stored without one (before Archivist asked S3 for checksums): a copy of
// the object onto itself asking for the checksum, with its metadata as it
// was. S3 copies objects of up to 5 GiB in one request; a larger one keeps
// no checksum (ErrNoProviderChecksum). The checksum is of the bytes as they
// are now: the caller compares it with what it knows they should be.
func (s *S3) AddChecksum(ctx context.Context, key string) (Info, error) {
	oi, err := s.stat(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("add a checksum: %w", err)
	}
	if info := s.info(oi); info.Checksum.Digests() {
		return info, nil // it has one
	}
	if oi.Size > maxSinglePut {
		return Info{}, fmt.Errorf("add a checksum to %s (%d bytes, beyond one copy's 5 GiB): %w", key, oi.Size, ErrNoProviderChecksum)
	}
	meta := map[string]string{}
	for k, v := range oi.UserMetadata {
		meta[strings.TrimPrefix(strings.TrimPrefix(k, "X-Amz-Meta-"), "x-amz-meta-")] = v
	}
	dst := minio.CopyDestOptions{Bucket: s.bucket, Object: s.prefix + key, ReplaceMetadata: true, UserMetadata: meta,
		ChecksumType: minio.ChecksumSHA256}
	if oi.ContentType != "" {
		dst.ContentType = oi.ContentType
	}
	src := minio.CopySrcOptions{Bucket: s.bucket, Object: s.prefix + key, MatchETag: oi.ETag}
	if _, err := s.c.CopyObject(ctx, dst, src); err != nil {
		if code := minio.ToErrorResponse(err).Code; code == "NotImplemented" || code == "InvalidRequest" {
			return Info{}, fmt.Errorf("add a checksum to %s: %v: %w", key, err, ErrNoProviderChecksum)
		}
		return Info{}, fmt.Errorf("add a checksum to %s: %w", key, s3Fault(err))
	}
	return s.Stat(ctx, key)
}
