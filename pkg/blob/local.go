package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Local is a blob store in a directory. An object lives at <root>/<key>;
// its checksum and properties at <root>/.archivist-meta/<key>.json. Writes go
// to a temporary file in <root>/.archivist-tmp, are synced, then renamed into
// place, so a reader never sees half an object. The checksum is sha256,
// computed while the object is written (or, for a file put there by other
// means, on first Stat).
type Local struct {
	root   string
	noSync bool
}

// LocalOption configures a local store.
type LocalOption func(*Local)

// WithoutSync skips the fsync of each write: for throwaway stores
// (benchmarks, scratch space), where a crash may lose or tear writes.
func WithoutSync() LocalOption { return func(l *Local) { l.noSync = true } }

const (
	metaDir = reservedPrefix + "meta"
	tmpDir  = reservedPrefix + "tmp"
)

// NewLocal opens (creating if needed) a local store rooted at dir.
func NewLocal(dir string, opts ...LocalOption) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob root %s: %w", dir, err)
	}
	for _, d := range []string{abs, filepath.Join(abs, metaDir), filepath.Join(abs, tmpDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create blob dir: %w", err)
		}
	}
	l := &Local{root: abs}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Root is the store's directory.
func (l *Local) Root() string { return l.root }

type localMeta struct {
	Size       int64             `json:"size"`
	SHA256     string            `json:"sha256"`
	ModNano    int64             `json:"mod_unix_nano"`
	Properties map[string]string `json:"properties,omitempty"`
}

func (l *Local) path(key string) string { return filepath.Join(l.root, filepath.FromSlash(key)) }
func (l *Local) metaPath(key string) string {
	return filepath.Join(l.root, metaDir, filepath.FromSlash(key)+".json")
}

// Put implements Store.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	h := sha256.New()
	size, err := l.writeAtomic(l.path(key), io.TeeReader(ctxReader{ctx, r}, h))
	if err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	fi, err := os.Stat(l.path(key))
	if err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	m := localMeta{Size: size, SHA256: hex.EncodeToString(h.Sum(nil)), ModNano: fi.ModTime().UnixNano(), Properties: props}
	if err := l.writeMeta(key, m); err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	return m.info(key), nil
}

func (m localMeta) info(key string) Info {
	return Info{Key: key, Size: m.Size, Checksum: Checksum{Algorithm: "sha256", Value: m.SHA256},
		Modified: time.Unix(0, m.ModNano).UTC(), Properties: m.Properties}
}

func (l *Local) writeMeta(key string, m localMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = l.writeAtomic(l.metaPath(key), strings.NewReader(string(b)))
	return err
}

// writeAtomic writes r to a temp file, syncs it and renames it to dst.
func (l *Local) writeAtomic(dst string, r io.Reader) (int64, error) {
	f, err := os.CreateTemp(filepath.Join(l.root, tmpDir), "put-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	n, err := io.Copy(f, r)
	if err == nil && !l.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, err
	}
	return n, nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	info, err := l.Stat(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(l.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("get %s: %w", key, err)
	}
	return f, info, nil
}

// Stat implements Store. When the recorded metadata does not describe the
// file on disk (a file put there by other means, or a crash between writing
// object and metadata), the checksum is computed again and recorded.
func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(l.path(key))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir()) {
		return Info{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	var m localMeta
	if b, err := os.ReadFile(l.metaPath(key)); err == nil && json.Unmarshal(b, &m) == nil &&
		m.Size == fi.Size() && m.ModNano == fi.ModTime().UnixNano() {
		return m.info(key), nil
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return Info{}, fmt.Errorf("checksum %s: %w", key, err)
	}
	m = localMeta{Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), ModNano: fi.ModTime().UnixNano(), Properties: m.Properties}
	if err := l.writeMeta(key, m); err != nil {
		return Info{}, fmt.Errorf("record checksum of %s: %w", key, err)
	}
	return m.info(key), nil
}

// List implements Store.
func (l *Local) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		var keys []string
		err := filepath.WalkDir(l.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(l.root, p)
			key := filepath.ToSlash(rel)
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), reservedPrefix) {
					return filepath.SkipDir
				}
				// Skip directories that cannot hold a key with the prefix.
				if key != "." && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasPrefix(key, prefix) && d.Type().IsRegular() {
				keys = append(keys, key)
			}
			return ctx.Err()
		})
		if err != nil {
			yield(Info{}, fmt.Errorf("list %q: %w", prefix, err))
			return
		}
		sort.Strings(keys)
		for _, k := range keys {
			info, err := l.Stat(ctx, k)
			if errors.Is(err, ErrNotFound) {
				continue // deleted meanwhile
			}
			if !yield(info, err) || err != nil {
				return
			}
		}
	}
}

// Delete implements Store.
func (l *Local) Delete(_ context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := os.Remove(l.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := os.Remove(l.metaPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s metadata: %w", key, err)
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
