package blobtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/archivist/archivist/pkg/blob"
)

// S3Options shapes an S3 stand-in.
type S3Options struct {
	// KMS answers as a bucket under SSE-KMS does: every ETag is 32 hex
	// characters that are not the content's MD5, and every object reports
	// x-amz-server-side-encryption: aws:kms.
	KMS bool
}

// S3 is an S3 endpoint for tests: gofakes3 (an S3-protocol server, in
// memory) made to answer as AWS S3 does where Archivist depends on it.
//
//   - Checksums: a put that sends x-amz-checksum-ALGO (as a header or an
//     aws-chunked trailer) has it checked against the bytes (400 BadDigest
//     on a mismatch) and kept; a multipart upload asked for a full-object
//     checksum gets one computed over the whole object on completion; a
//     copy asked for one (x-amz-checksum-algorithm) computes it; HEAD and
//     GET report it under x-amz-checksum-mode: ENABLED.
//   - ETags: a multipart object's ETag is "<hex>-<parts>", no digest of the
//     content; under KMS no ETag is an MD5.
//   - Conditional writes: a put, or a multipart upload's start or
//     completion (as MinIO; AWS checks the completion), with
//     If-None-Match: * is refused (412 PreconditionFailed) where the key
//     holds an object.
//   - Rot: the bytes of an object can change behind the store's back (Rot)
//     while what S3 says of them (ETag, checksum, metadata) stays, as bit
//     rot under a provider would.
type S3 struct {
	// Endpoint is the host:port of the S3 API.
	Endpoint string
	// Handler serves the S3 API (to mount on a server of one's own).
	Handler http.Handler

	backend *s3mem.Backend
	opts    S3Options

	mu      sync.Mutex
	objects map[string]s3Record // "bucket/key"
	// writes serialises the writes of one object (striped by key): a
	// write to gofakes3 and its record are one step, as a put is in S3.
	writes  [64]sync.Mutex
	uploads map[string]string // upload id → requested checksum algorithm
}

type s3Record struct {
	etag     string
	algo     string // "sha256", "crc64nvme", ... ("" none)
	checksum string // base64, as S3 gives it
	mode     string // FULL_OBJECT or COMPOSITE
}

// NewS3Handler returns a stand-in without a server: serve its Handler.
func NewS3Handler(opts S3Options) *S3 {
	s := &S3{backend: s3mem.New(), opts: opts, objects: map[string]s3Record{}, uploads: map[string]string{}}
	s.Handler = s.handler(gofakes3.New(s.backend).Server())
	return s
}

// NewS3 starts a stand-in on a free port for the test's life.
func NewS3(t testing.TB, opts S3Options) *S3 {
	t.Helper()
	s := NewS3Handler(opts)
	srv := httptest.NewServer(s.Handler)
	t.Cleanup(srv.Close)
	s.Endpoint = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// Client is a raw S3 client of the stand-in at endpoint (the stand-in's own
// Endpoint when empty), for a test to act behind the store's back.
func (s *S3) Client(t testing.TB, endpoint string) *minio.Client {
	t.Helper()
	if endpoint == "" {
		endpoint = s.Endpoint
	}
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4("key", "secret", ""),
		BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Bucket makes a bucket and opens a blob store on it (under prefix, which
// may be empty).
func (s *S3) Bucket(t testing.TB, bucket, prefix string) blob.Store {
	t.Helper()
	ctx := context.Background()
	if err := s.Client(t, "").MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	st, err := blob.Open(ctx, blob.Config{URL: "s3://" + bucket + "/" + prefix + "?endpoint=" + s.Endpoint +
		"&secure=false&path_style=true&region=us-east-1", S3AccessKeyID: "key", S3SecretAccessKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Rot changes the bytes of bucket/key with change, keeping everything S3
// says of the object: its ETag, its checksum and its metadata.
func (s *S3) Rot(t testing.TB, bucket, key string, change func([]byte)) {
	t.Helper()
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if err != nil {
		t.Fatal(err)
	}
	change(data)
	if _, err := s.backend.PutObject(bucket, key, obj.Metadata, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

func (s *S3) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		q := r.URL.Query()
		switch {
		case key == "":
			next.ServeHTTP(w, r)
		case r.Method == http.MethodPut && q.Has("uploadId"): // a part
			s.put(w, r, next, "", "")
		case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
			s.copy(w, r, next, bucket, key)
		case r.Method == http.MethodPut:
			s.put(w, r, next, bucket, key)
		case r.Method == http.MethodPost && q.Has("uploads"):
			s.initiate(w, r, next)
		case r.Method == http.MethodPost && q.Has("uploadId"):
			s.complete(w, r, next, bucket, key, q.Get("uploadId"))
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			s.read(w, r, next, bucket, key)
		case r.Method == http.MethodDelete && !q.Has("uploadId"):
			defer s.lockObject(bucket, key)()
			next.ServeHTTP(w, r)
			s.mu.Lock()
			delete(s.objects, bucket+"/"+key)
			s.mu.Unlock()
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// put decodes an aws-chunked body, checks a stated checksum, and records
// it with the ETag S3 would give (bucket empty: a part, recorded nowhere).
func (s *S3) put(w http.ResponseWriter, r *http.Request, next http.Handler, bucket, key string) {
	body, trailer, err := readBody(r)
	if err != nil {
		s3Error(w, http.StatusBadRequest, "IncompleteBody", err.Error())
		return
	}
	algo, stated := statedChecksum(r.Header, trailer)
	var sum string
	if algo != "" {
		sum = checksumOf(algo, body)
		if sum == "" {
			s3Error(w, http.StatusBadRequest, "InvalidRequest", "unsupported checksum algorithm "+algo)
			return
		}
		if stated != "" && stated != sum {
			s3Error(w, http.StatusBadRequest, "BadDigest", "the "+algo+" you specified did not match the calculated checksum")
			return
		}
	}
	if bucket != "" {
		defer s.lockObject(bucket, key)()
		if s.refuseExisting(w, r, bucket, key) {
			return
		}
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, forward(r, body))
	if rec.Code == http.StatusOK && bucket != "" {
		s.mu.Lock()
		s.objects[bucket+"/"+key] = s3Record{etag: s.etag(body, 0), algo: algo, checksum: sum, mode: "FULL_OBJECT"}
		s.mu.Unlock()
	}
	if algo != "" && rec.Code == http.StatusOK {
		rec.Header().Set("x-amz-checksum-"+algo, sum)
	}
	copyResponse(w, rec)
}

func (s *S3) initiate(w http.ResponseWriter, r *http.Request, next http.Handler) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if s.refuseExisting(w, r, bucket, key) {
		return
	}
	algo := strings.ToLower(r.Header.Get("X-Amz-Checksum-Algorithm"))
	if r.Header.Get("X-Amz-Checksum-Type") == "COMPOSITE" || (algo != "" && algo != "crc64nvme" && r.Header.Get("X-Amz-Checksum-Type") != "FULL_OBJECT") {
		algo = "" // a composite checksum digests no content
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	if rec.Code == http.StatusOK {
		var res struct {
			UploadID string `xml:"UploadId"`
		}
		if err := xml.Unmarshal(rec.Body.Bytes(), &res); err == nil && res.UploadID != "" {
			s.mu.Lock()
			s.uploads[res.UploadID] = algo
			s.mu.Unlock()
		}
	}
	copyResponse(w, rec)
}

func (s *S3) complete(w http.ResponseWriter, r *http.Request, next http.Handler, bucket, key, upload string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s3Error(w, http.StatusBadRequest, "IncompleteBody", err.Error())
		return
	}
	parts := bytes.Count(body, []byte("<PartNumber>"))
	defer s.lockObject(bucket, key)()
	if s.refuseExisting(w, r, bucket, key) {
		return
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, forward(r, body))
	if rec.Code == http.StatusOK {
		s.mu.Lock()
		algo := s.uploads[upload]
		delete(s.uploads, upload)
		s.mu.Unlock()
		data, err := s.content(bucket, key)
		if err != nil {
			s3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		r := s3Record{etag: s.etag(data, parts), mode: "FULL_OBJECT"}
		if algo != "" {
			r.algo, r.checksum = algo, checksumOf(algo, data)
		}
		s.mu.Lock()
		s.objects[bucket+"/"+key] = r
		s.mu.Unlock()
	}
	copyResponse(w, rec)
}

func (s *S3) copy(w http.ResponseWriter, r *http.Request, next http.Handler, bucket, key string) {
	defer s.lockObject(bucket, key)()
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	if rec.Code == http.StatusOK {
		data, err := s.content(bucket, key)
		if err != nil {
			s3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		rc := s3Record{etag: s.etag(data, 0), mode: "FULL_OBJECT"}
		if algo := strings.ToLower(r.Header.Get("X-Amz-Checksum-Algorithm")); algo != "" {
			rc.algo, rc.checksum = algo, checksumOf(algo, data)
		}
		s.mu.Lock()
		s.objects[bucket+"/"+key] = rc
		s.mu.Unlock()
	}
	copyResponse(w, rec)
}

// refuseExisting answers a conditional write (If-None-Match: *, on a put
// or a multipart upload's completion) whose key holds an object as S3
// does, 412 PreconditionFailed, and reports whether it did. The caller
// holds the key's write lock.
func (s *S3) refuseExisting(w http.ResponseWriter, r *http.Request, bucket, key string) bool {
	if strings.TrimSpace(r.Header.Get("If-None-Match")) != "*" {
		return false
	}
	if _, err := s.backend.HeadObject(bucket, key); err != nil {
		return false
	}
	s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	return true
}

// lockObject holds the writes of bucket/key until the returned func runs.
func (s *S3) lockObject(bucket, key string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(bucket + "/" + key))
	m := &s.writes[h.Sum32()%uint32(len(s.writes))]
	m.Lock()
	return m.Unlock
}

// read answers HEAD and GET with what S3 recorded of the object.
func (s *S3) read(w http.ResponseWriter, r *http.Request, next http.Handler, bucket, key string) {
	s.mu.Lock()
	rec, ok := s.objects[bucket+"/"+key]
	s.mu.Unlock()
	if !ok { // stored around the stand-in (Rot of an unknown key): as it is
		next.ServeHTTP(w, r)
		return
	}
	hw := &headerRewriter{ResponseWriter: w, rewrite: func(h http.Header) {
		if h.Get("ETag") == "" {
			return // an error
		}
		h.Set("ETag", `"`+rec.etag+`"`)
		if s.opts.KMS {
			h.Set("X-Amz-Server-Side-Encryption", "aws:kms")
		}
		if rec.algo != "" && strings.EqualFold(r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED") && r.Header.Get("Range") == "" {
			h.Set("X-Amz-Checksum-"+strings.ToUpper(rec.algo[:1])+rec.algo[1:], rec.checksum)
			h.Set("X-Amz-Checksum-Type", rec.mode)
		}
	}}
	next.ServeHTTP(hw, r)
	if !hw.wrote { // a HEAD answered with headers only
		hw.WriteHeader(http.StatusOK)
	}
}

func (s *S3) content(bucket, key string) ([]byte, error) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer obj.Contents.Close()
	return io.ReadAll(obj.Contents)
}

// etag is the ETag S3 gives: the MD5 of a single put, "<hex>-<parts>" for
// a multipart upload, and under KMS no MD5 at all.
func (s *S3) etag(data []byte, parts int) string {
	sum := md5.Sum(data)
	e := hex.EncodeToString(sum[:])
	if s.opts.KMS {
		var b [16]byte
		rand.Read(b[:])
		e = hex.EncodeToString(b[:])
	}
	if parts > 0 {
		e += fmt.Sprintf("-%d", parts)
	}
	return e
}

// statedChecksum is the checksum a put states, from its headers or its
// trailer: the algorithm and the base64 value.
func statedChecksum(h, trailer http.Header) (algo, value string) {
	for _, hs := range []http.Header{trailer, h} {
		for k, v := range hs {
			name := strings.ToLower(k)
			if a, ok := strings.CutPrefix(name, "x-amz-checksum-"); ok && a != "algorithm" && a != "type" && a != "mode" && len(v) > 0 {
				return a, v[0]
			}
		}
	}
	if a := h.Get("X-Amz-Checksum-Algorithm"); a != "" {
		return strings.ToLower(a), ""
	}
	return "", ""
}

// checksumOf is S3's checksum algo of data, base64 ("" if unsupported).
func checksumOf(algo string, data []byte) string {
	h := blob.NewHash(algo)
	if h == nil {
		return ""
	}
	h.Write(data)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// readBody reads a request's payload, decoding aws-chunked encoding (and
// its trailer) when the request uses it.
func readBody(r *http.Request) ([]byte, http.Header, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	if !strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") &&
		!strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return raw, nil, nil
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	var out bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, fmt.Errorf("aws-chunked: chunk header: %w", err)
		}
		sizeHex, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		var n int64
		if _, err := fmt.Sscanf(sizeHex, "%x", &n); err != nil {
			return nil, nil, fmt.Errorf("aws-chunked: chunk size %q: %w", sizeHex, err)
		}
		if n == 0 {
			break
		}
		if _, err := io.CopyN(&out, br, n); err != nil {
			return nil, nil, fmt.Errorf("aws-chunked: chunk: %w", err)
		}
		if _, err := br.Discard(2); err != nil {
			return nil, nil, fmt.Errorf("aws-chunked: chunk end: %w", err)
		}
	}
	trailer := http.Header{}
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, "x-amz-trailer-signature") {
			trailer.Set(k, v)
		}
		if err != nil {
			break
		}
	}
	return out.Bytes(), trailer, nil
}

// forward is r with body as its plain payload.
func forward(r *http.Request, body []byte) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.Header.Set("Content-Length", fmt.Sprint(len(body)))
	r2.Header.Del("Content-Encoding")
	r2.Header.Del("X-Amz-Decoded-Content-Length")
	r2.Header.Del("X-Amz-Trailer")
	if strings.HasPrefix(r2.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		r2.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	}
	return r2
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func s3Error(w http.ResponseWriter, code int, s3code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, s3code, msg)
}

// headerRewriter changes a response's headers before they are sent.
type headerRewriter struct {
	http.ResponseWriter
	rewrite func(http.Header)
	wrote   bool
}

func (h *headerRewriter) WriteHeader(code int) {
	if !h.wrote {
		h.wrote = true
		if code < 300 {
			h.rewrite(h.Header())
		}
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerRewriter) Write(b []byte) (int, error) {
	if !h.wrote {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseWriter.Write(b)
}
