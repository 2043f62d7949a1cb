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

	"github.com/archivist/archivist/pkg/fault"
)

// Local is a blob store in a directory. An object lives at <root>/<key>;
// its checksum and properties in an extended attribute of the file
// (user.archivist.meta, as OpenStack Swift keeps its objects' metadata),
// or, on a file system without them, at <root>/.archivist-meta/<key>.json.
// Writes go
// to a temporary file (.archivist-put-*) in the destination's directory, are
// synced, then renamed into place, so a reader never sees half an object;
// listings skip such files. (One shared temporary directory serialised
// every writer on its lock: creating a file there took a quarter of the
// ingest's time with 16 jobs at once.) The checksum is sha256,
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
)

// NewLocal opens (creating if needed) a local store rooted at dir.
func NewLocal(dir string, opts ...LocalOption) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob root %s: %w", dir, err)
	}
	for _, d := range []string{abs, filepath.Join(abs, metaDir)} {
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

// Check reports whether the store's directory is there: its metadata
// directory, made when the store was opened, is the mark of a mounted
// volume. A root that is gone, unmounted or unreadable is an outage of the
// blob store (fault.Outage), never a missing object.
func (l *Local) Check(context.Context) error {
	fi, err := os.Stat(filepath.Join(l.root, metaDir))
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		err = errors.New("not a directory")
	}
	return fault.Outage(fault.BlobStore, fmt.Errorf("local store root %s is missing, unmounted or unreadable: %w", l.root, err))
}

// notFound is the error for key that is not there: ErrNotFound while the
// store is there, the store's outage when its root is not.
func (l *Local) notFound(op, key string) error {
	if err := l.Check(context.Background()); err != nil {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
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

// Put implements Store. Under ImmutablePrefix the object is linked into
// place, which fails where the key holds one: that one stays (ErrExists),
// or, when it has the same bytes, is the put's answer.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error) {
	return l.put(ctx, key, r, props, !Immutable(key))
}

// restore is Restore's put: it replaces any object at key.
func (l *Local) restore(ctx context.Context, key string, r io.Reader, props map[string]string) (Info, error) {
	return l.put(ctx, key, r, props, true)
}

// put writes r to key, replacing an object there if replace.
func (l *Local) put(ctx context.Context, key string, r io.Reader, props map[string]string, replace bool) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	// A write must not make a new, empty store where the volume was.
	if err := l.Check(ctx); err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	want, props := takeSHA256(props)
	var m localMeta
	sidecar := false
	err := l.writeAtomic(l.path(key), replace, func(f *os.File) error {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
		if err != nil {
			return err
		}
		if sum := hex.EncodeToString(h.Sum(nil)); want != "" && sum != want {
			return fmt.Errorf("%w: stated %s, read %s", ErrChecksumMismatch, want, sum)
		}
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		m = localMeta{Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), ModNano: fi.ModTime().UnixNano(), Properties: props}
		// The metadata rides on the file itself, set before the rename, so
		// object and metadata appear together; where the file system has
		// no extended attributes it goes to a file of its own after.
		sidecar = setXattrMeta(f, m) != nil
		return nil
	})
	if errors.Is(err, fs.ErrExist) {
		// Another object holds the key: the same bytes (a retry) answer
		// the put; other bytes stay, refused.
		held, serr := l.Stat(ctx, key)
		if serr != nil {
			return Info{}, fmt.Errorf("put %s: %w", key, serr)
		}
		if held.Size == m.Size && held.Checksum.Value == m.SHA256 {
			return held, nil
		}
		return Info{}, fmt.Errorf("put %s (sha256 %s): it holds sha256 %s: %w", key, m.SHA256, held.Checksum.Value, ErrExists)
	}
	if err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	if sidecar {
		err = l.writeMeta(key, m)
	} else {
		// A sidecar of an earlier put of the key no longer describes it.
		err = os.Remove(l.metaPath(key))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		return Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	return m.info(key), nil
}

func (m localMeta) info(key string) Info {
	return Info{Key: key, Size: m.Size, Checksum: Checksum{Algorithm: "sha256", Value: m.SHA256},
		Modified: time.Unix(0, m.ModNano).UTC(), Properties: m.Properties}
}

// writeMeta records m for key: on the file if the file system allows,
// else in the sidecar file.
func (l *Local) writeMeta(key string, m localMeta) error {
	if f, err := os.Open(l.path(key)); err == nil {
		err = setXattrMeta(f, m)
		f.Close()
		if err == nil {
			return nil
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return l.writeAtomic(l.metaPath(key), true, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// readMeta reads what Put or Stat recorded for key, from the file or the
// sidecar.
func (l *Local) readMeta(key string) (localMeta, bool) {
	var m localMeta
	if b, err := getXattrMeta(l.path(key)); err == nil && json.Unmarshal(b, &m) == nil {
		return m, true
	}
	if b, err := os.ReadFile(l.metaPath(key)); err == nil && json.Unmarshal(b, &m) == nil {
		return m, true
	}
	return localMeta{}, false
}

// writeAtomic creates a temporary file beside dst, lets fill write it,
// syncs it and renames it to dst (replace), or links it there, which fails
// with fs.ErrExist where dst is (after fill has run).
func (l *Local) writeAtomic(dst string, replace bool, fill func(f *os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), reservedPrefix+"put-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = fill(f)
	if err == nil && !l.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !replace {
		return os.Link(tmp, dst) // tmp is removed: dst is the one name left
	}
	return os.Rename(tmp, dst)
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	info, err := l.Stat(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(l.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, l.notFound("get", key)
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
		return Info{}, l.notFound("stat", key)
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	m, ok := l.readMeta(key)
	if ok && m.Size == fi.Size() && m.ModNano == fi.ModTime().UnixNano() {
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
		if err := l.Check(ctx); err != nil {
			yield(Info{}, fmt.Errorf("list %q: %w", prefix, err))
			return
		}
		var keys []string
		err := l.walkKeys(ctx, prefix, nil, func(key string) { keys = append(keys, key) })
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

// walkKeys calls key with every object's key under prefix, in no set order,
// skipping the directories that cannot hold one, and those ("a/b/") that
// skipDir (if not nil) says hold none that is wanted. The walk starts in
// the deepest directory the prefix names ("objects/x/v2/" or
// "objects/x/v2/a" start at objects/x/v2): its siblings, however many
// (every object of the archive beside one), are never read.
func (l *Local) walkKeys(ctx context.Context, prefix string, skipDir func(dir string) bool, key func(string)) error {
	start := l.root
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		start = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
		if fi, err := os.Stat(start); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
			return nil // no key under it
		}
	}
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(l.root, p)
		k := filepath.ToSlash(rel)
		if d.IsDir() {
			if k == "." {
				return nil
			}
			dir := k + "/"
			if strings.HasPrefix(d.Name(), reservedPrefix) ||
				!strings.HasPrefix(dir, prefix) && !strings.HasPrefix(prefix, dir) ||
				skipDir != nil && skipDir(dir) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(k, prefix) && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), reservedPrefix) {
			key(k)
		}
		return ctx.Err()
	})
}

// Delete implements Store.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := l.Check(ctx); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
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
