// Package blob is the blob store every Archivist service shares: audio, WARC
// files and ingested content. It has two implementations behind one small
// interface: a local directory (the default) and an S3-compatible bucket.
// Both report the store's own checksum of each object: the auditor's
// "storage provider checksum".
package blob

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/minio/minio-go/v7"
	"hash"
	"io"
	"iter"
	"net/url"
	"strings"
	"time"

	"github.com/minio/crc64nvme"

	"github.com/archivist/archivist/pkg/fault"
)

// ErrNotFound is returned (wrapped) for a key that names no object.
var ErrNotFound = errors.New("blob not found")

// PropSHA256 is the property by which a Put states the content's SHA-256
// (hex), when the writer knows it. It is not kept as a property: every
// store checks it against the bytes it received (a mismatch fails the put
// and keeps nothing; on S3 a single put sends it as the object's
// x-amz-checksum-sha256, which S3 verifies), and the store's own checksum,
// never this statement, is what an audit compares.
const PropSHA256 = "sha256"

// ErrChecksumMismatch is returned (wrapped) by a Put whose content does not
// have the SHA-256 its PropSHA256 stated.
var ErrChecksumMismatch = errors.New("content does not match its stated sha256")

// takeSHA256 splits the stated SHA-256 from the other properties.
func takeSHA256(props map[string]string) (string, map[string]string) {
	want, ok := props[PropSHA256]
	if !ok {
		return "", props
	}
	rest := make(map[string]string, len(props)-1)
	for k, v := range props {
		if k != PropSHA256 {
			rest[k] = v
		}
	}
	if len(rest) == 0 {
		rest = nil
	}
	return strings.ToLower(want), rest
}

// Checksum is a store's own checksum of an object: the storage provider's,
// computed by the store from the bytes it received, never a writer's claim.
type Checksum struct {
	// Algorithm is "sha256" (the local store; S3 for a single put),
	// "crc64nvme" (S3 for a multipart upload), "md5" (an S3 ETag of a
	// single unencrypted put made before S3 was asked for a checksum) or
	// "s3-etag" (an ETag that digests nothing: multipart, SSE-KMS, SSE-C).
	Algorithm string
	// Value is the checksum in lower-case hex (or the ETag as the store gave it).
	Value string
}

// Digests reports whether the checksum is a digest of the content, which a
// reader can compute (NewHash) and compare; false for an ETag that digests
// nothing: the provider then has no checksum to offer.
func (c Checksum) Digests() bool { return NewHash(c.Algorithm) != nil }

// NewHash returns a hash of algorithm ("sha256", "md5", "crc64nvme"; the
// names S3 gives them, in any case), or nil for one the stores do not use.
func NewHash(algorithm string) hash.Hash {
	switch strings.ToLower(algorithm) {
	case "sha256":
		return sha256.New()
	case "md5":
		return md5.New()
	case "crc64nvme":
		return crc64nvme.New()
	}
	return nil
}

func (c Checksum) String() string { return c.Algorithm + ":" + c.Value }

// Info describes a stored object.
type Info struct {
	// Key is the object's key.
	Key string
	// Size in bytes.
	Size int64
	// Checksum is the store's own checksum.
	Checksum Checksum
	// Modified is when the object was last written.
	Modified time.Time
	// Properties are the object's user properties (content type and the like).
	Properties map[string]string
}

// Store is a blob store. Keys are slash-separated relative paths: no leading
// slash, no empty, "." or ".." segments, no backslashes or control characters.
type Store interface {
	// Put streams r into key, replacing any object there, and returns what
	// the store recorded. A reader of key sees the old object or the new one,
	// never a part. Under ImmutablePrefix a put only creates: a key that
	// holds an object keeps it (ErrExists), unless the put's bytes are the
	// same (a retry, which succeeds and changes nothing).
	Put(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error)
	// Get opens the object for reading.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat describes the object without reading it.
	Stat(ctx context.Context, key string) (Info, error)
	// List yields every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) iter.Seq2[Info, error]
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ImmutablePrefix starts the keys of the archive's object versions
// (objects/<ARK>/v<N>/...): a stored version never changes, so every store
// only creates objects there (S3's conditional If-None-Match: *, the local
// store's exclusive link), never replaces one. Restore is the one way back
// to a version's recorded bytes; Delete (a withdrawal) removes them.
const ImmutablePrefix = "objects/"

// Immutable reports whether key is under ImmutablePrefix: its object, once
// stored, is never replaced by other bytes.
func Immutable(key string) bool { return strings.HasPrefix(key, ImmutablePrefix) }

// ErrExists is returned (wrapped) by a Put under ImmutablePrefix whose key
// already holds other bytes: nothing was changed.
var ErrExists = errors.New("the key holds a stored version's other bytes, which never change")

// Restore puts the bytes of an object back as the archive recorded them
// (a repair from a second copy): unlike Put it replaces an object under
// ImmutablePrefix, and only with content whose SHA-256 is sha256, which the
// store checks (ErrChecksumMismatch, nothing changed where the store can
// refuse before replacing). What a version holds thus never changes: it is
// only ever returned to what was recorded.
func Restore(ctx context.Context, s Store, key string, r io.Reader, sha256 string) (Info, error) {
	if len(sha256) != 64 {
		return Info{}, fmt.Errorf("restore %s: the recorded sha256 is needed, got %q: %w", key, sha256, ErrChecksumMismatch)
	}
	props := map[string]string{PropSHA256: sha256}
	if rs, ok := s.(interface {
		restore(context.Context, string, io.Reader, map[string]string) (Info, error)
	}); ok {
		return rs.restore(ctx, key, r, props)
	}
	if Immutable(key) {
		// A store of another kind (a test's wrapper): out, then in.
		if err := s.Delete(ctx, key); err != nil {
			return Info{}, fmt.Errorf("restore %s: %w", key, err)
		}
	}
	return s.Put(ctx, key, r, props)
}

// ErrNoProviderChecksum is returned (wrapped) by AddChecksum for an object
// the store cannot give a checksum of its own.
var ErrNoProviderChecksum = errors.New("the store cannot give this object a checksum of its own")

// AddChecksum asks s to compute and keep a checksum of its own of the
// object at key, which was stored without one (S3: a copy onto itself
// asking for a SHA-256), and returns what s then says of it. The checksum
// is of the bytes as they are: compare it with what they should be. A
// store that cannot returns ErrNoProviderChecksum; one whose every object
// has one (the local store) returns the object as it is.
func AddChecksum(ctx context.Context, s Store, key string) (Info, error) {
	if a, ok := s.(interface {
		AddChecksum(context.Context, string) (Info, error)
	}); ok {
		return a.AddChecksum(ctx, key)
	}
	info, err := s.Stat(ctx, key)
	if err == nil && !info.Checksum.Digests() {
		return info, fmt.Errorf("add a checksum to %s: %w", key, ErrNoProviderChecksum)
	}
	return info, err
}

// Check reports whether s answers: nil when it can say whether an object
// exists. A store that cannot (its directory gone, its endpoint refusing)
// returns an outage of the blob store (fault.Outage): the service pauses
// instead of taking objects for missing.
func Check(ctx context.Context, s Store) error {
	if c, ok := s.(interface{ Check(context.Context) error }); ok {
		return c.Check(ctx)
	}
	if _, err := s.Stat(ctx, ".archivist/health"); err != nil && !errors.Is(err, ErrNotFound) {
		return fault.Outage(fault.BlobStore, err)
	}
	return nil
}

// Config says which store to open.
type Config struct {
	// URL is file:///abs/dir (or a plain path) for a local directory, or
	// s3://bucket/prefix?endpoint=host:port&secure=true&region=r&path_style=false
	// for a bucket (and sts_endpoint=URL for a private security token
	// service).
	URL string `env:"BLOB_URL, default=file://./.archivist/blobs"`
	// S3AccessKeyID is the S3 access key; without it the credentials come
	// from the platform's chain (AWS variables, IRSA, Pod Identity, the
	// instance role: S3Options.AccessKey).
	S3AccessKeyID string `env:"S3_ACCESS_KEY_ID"`
	// S3SecretAccessKey is the S3 secret key.
	S3SecretAccessKey string `env:"S3_SECRET_ACCESS_KEY"`
}

// Open opens the store cfg names.
func Open(ctx context.Context, cfg Config) (Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("BLOB_URL is empty: name a directory (file:///path) or a bucket (s3://...)")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse BLOB_URL: %w", err)
	}
	switch u.Scheme {
	case "", "file":
		dir := u.Path
		if u.Host != "" { // file://./rel → host "." path "/rel"
			dir = u.Host + u.Path
		}
		if u.Scheme == "" {
			dir = cfg.URL
		}
		return NewLocal(dir)
	case "s3":
		return NewS3(ctx, s3OptionsOf(u, cfg))
	default:
		return nil, fmt.Errorf("BLOB_URL scheme %q: want file or s3", u.Scheme)
	}
}

// s3OptionsOf reads an s3:// BLOB_URL and cfg's credentials.
func s3OptionsOf(u *url.URL, cfg Config) S3Options {
	q := u.Query()
	return S3Options{
		Endpoint:    q.Get("endpoint"),
		Bucket:      u.Host,
		Prefix:      strings.TrimPrefix(u.Path, "/"),
		Region:      q.Get("region"),
		AccessKey:   cfg.S3AccessKeyID,
		SecretKey:   cfg.S3SecretAccessKey,
		Secure:      q.Get("secure") != "false",
		PathStyle:   q.Get("path_style") == "true",
		STSEndpoint: q.Get("sts_endpoint"),
	}
}

// MakeBucket makes the bucket an s3:// URL names, unless it exists (a
// directory, for a file:// one): what a first start of a system on an S3
// server of its own needs (compose on MinIO).
func MakeBucket(ctx context.Context, cfg Config) error {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return fmt.Errorf("parse BLOB_URL: %w", err)
	}
	if u.Scheme != "s3" {
		_, err := Open(ctx, cfg)
		return err
	}
	o := s3OptionsOf(u, cfg)
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(o.Endpoint, &minio.Options{Creds: s3Credentials(o), Secure: o.Secure, Region: o.Region, BucketLookup: lookup})
	if err != nil {
		return fmt.Errorf("s3 client for %s: %w", o.Endpoint, err)
	}
	if ok, err := c.BucketExists(ctx, o.Bucket); err != nil {
		return fmt.Errorf("s3 bucket %s at %s: %w", o.Bucket, o.Endpoint, err)
	} else if ok {
		return nil
	}
	if err := c.MakeBucket(ctx, o.Bucket, minio.MakeBucketOptions{Region: o.Region}); err != nil {
		return fmt.Errorf("make s3 bucket %s at %s: %w", o.Bucket, o.Endpoint, err)
	}
	return nil
}

// ValidateKey checks that key is a safe relative key.
func ValidateKey(key string) error {
	if key == "" {
		return errors.New("blob key is empty")
	}
	if len(key) > 1024 {
		return fmt.Errorf("blob key is %d bytes long, at most 1024 allowed", len(key))
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("blob key %q starts with /", key)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("blob key %q contains a backslash or NUL", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("blob key %q contains a control character", key)
		}
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "", ".", "..":
			return fmt.Errorf("blob key %q has an empty, '.' or '..' segment", key)
		}
		if strings.HasPrefix(seg, reservedPrefix) {
			return fmt.Errorf("blob key %q uses the reserved prefix %q", key, reservedPrefix)
		}
	}
	return nil
}

// reservedPrefix starts the names the local store keeps for itself.
const reservedPrefix = ".archivist-"

// Location is where a reader outside Archivist (a Wayback's path index)
// finds the object at key: a file path in a local store, s3://BUCKET/NAME
// in a bucket.
func Location(s Store, key string) string {
	switch st := s.(type) {
	case *Local:
		return st.path(key)
	case *S3:
		return "s3://" + st.bucket + "/" + st.prefix + key
	}
	return key
}
