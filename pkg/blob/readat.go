package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/minio/minio-go/v7"
)

// RangeReader is a store that reads part of an object in one request: an
// index's block, a record at its offset.
type RangeReader interface {
	// ReadRange reads len(p) bytes of key from off, as io.ReaderAt does.
	ReadRange(ctx context.Context, key string, p []byte, off int64) (int, error)
}

// ReaderAt is key in s read at offsets, each read one request: a store's
// ranged reads where it has them (S3: a ranged GET, no stat first), else
// the reader Get opens, when it reads at offsets. A reader of several
// parts of an object pays a round trip a part, not two.
func ReaderAt(ctx context.Context, s Store, key string) (io.ReaderAt, error) {
	if rr, ok := s.(RangeReader); ok {
		return rangeAt{ctx: ctx, rr: rr, key: key}, nil
	}
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	ra, ok := rc.(io.ReaderAt)
	if !ok {
		rc.Close()
		return nil, fmt.Errorf("the blob store cannot read %s at offsets", key)
	}
	return readerAtCloser{ra, rc}, nil
}

type rangeAt struct {
	ctx context.Context
	rr  RangeReader
	key string
}

func (r rangeAt) ReadAt(p []byte, off int64) (int, error) {
	return r.rr.ReadRange(r.ctx, r.key, p, off)
}

// readerAtCloser keeps Get's reader closable through the io.ReaderAt.
type readerAtCloser struct {
	io.ReaderAt
	io.Closer
}

// ReadRange implements RangeReader: one ranged GET.
func (s *S3) ReadRange(ctx context.Context, key string, p []byte, off int64) (int, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, fmt.Errorf("read %s at %d: %w", key, off, err)
	}
	obj, err := s.c.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		return 0, fmt.Errorf("read %s at %d: %w", key, off, s3Fault(err))
	}
	defer obj.Close()
	n, err := io.ReadFull(obj, p)
	switch {
	case err == nil:
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = io.EOF // past the object's end, as io.ReaderAt says
	case notFound(err):
		err = fmt.Errorf("read %s: %w", key, ErrNotFound)
	default:
		err = fmt.Errorf("read %s at %d: %w", key, off, s3Fault(err))
	}
	return n, err
}

// ReadRange implements RangeReader.
func (l *Local) ReadRange(ctx context.Context, key string, p []byte, off int64) (int, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	f, err := os.Open(l.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return 0, l.notFound("read", key)
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	defer f.Close()
	return f.ReadAt(p, off)
}
