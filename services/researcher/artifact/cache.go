package artifact

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/archivist/archivist/pkg/blob"
)

// Prefix is where artifacts are kept in the blob store.
const Prefix = "derived/"

// ErrNotFound is returned (wrapped) for an artifact kept nowhere.
var ErrNotFound = errors.New("artifact not found")

// Cache keeps artifacts in a local directory of bounded size, in front of
// a blob store (nil: the directory alone). Open finds an artifact in the
// directory, else fetches it from the store; Create writes one to both.
// Artifacts are immutable: a key names one content (it holds the sha256
// of the audio and the version of the analysis). Safe for concurrent use.
type Cache struct {
	dir      string
	max      int64
	store    blob.Store
	key      []byte
	fetchMax int64
	log      *slog.Logger

	mu      sync.Mutex
	files   map[string]local // the directory's artifacts, by key
	size    int64
	evicted int64

	uploads chan upload // committed artifacts waiting to go to the store
	pending sync.WaitGroup
	failed  int64
}

// upload is an artifact committed locally, to be put in the store.
type upload struct {
	key, path string
	temp      bool // path is a temporary file, removed once uploaded (or not)
}

// uploadQueue bounds the artifacts waiting for the store: a Commit that
// finds it full uploads its own.
const uploadQueue = 16

type local struct {
	size int64
	used time.Time
}

// Options shape a Cache.
type Options struct {
	// Dir is the local directory (created if missing).
	Dir string
	// MaxBytes bounds the directory's artifacts; the least recently used
	// go first. An artifact larger than it is kept in the store alone.
	MaxBytes int64
	// Store is where every researcher finds artifacts (nil: none). An
	// artifact there is trusted only as far as its MAC under Key: a store
	// is shared with every writer of the bucket, and a forged print would
	// be replayed by every researcher for every later item of its audio.
	Store blob.Store
	// Key signs the artifacts put in the Store (HMAC-SHA256 of the key and
	// the bytes, kept as the object's property archivist-mac) and checks
	// those fetched: one without a good MAC is deleted and computed again.
	// A Store needs a Key.
	Key []byte
	// MaxFetchBytes bounds an artifact fetched from the Store (checked
	// before and while it is copied; default 4 GiB): a planted 25 GB file
	// would fill the pod's disk.
	MaxFetchBytes int64
	// Log receives warnings (slog.Default if nil).
	Log *slog.Logger
}

// New opens a cache, taking stock of what its directory holds (a file
// left half-written by a crash is removed).
func New(o Options) (*Cache, error) {
	if o.Dir == "" || o.MaxBytes <= 0 {
		return nil, errors.New("artifact cache: a directory and a positive size are needed")
	}
	if o.Store != nil && len(o.Key) < 16 {
		return nil, errors.New("artifact cache: a shared store needs a key of at least 16 bytes to sign and check its artifacts")
	}
	if o.MaxFetchBytes <= 0 {
		o.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("artifact cache: %w", err)
	}
	c := &Cache{dir: o.Dir, max: o.MaxBytes, store: o.Store, key: o.Key, fetchMax: o.MaxFetchBytes, log: o.Log, files: map[string]local{}, uploads: make(chan upload, uploadQueue)}
	if c.store != nil {
		go c.uploader()
	}
	err := filepath.WalkDir(o.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			return os.Remove(path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(o.Dir, path)
		c.files[filepath.ToSlash(rel)] = local{info.Size(), info.ModTime()}
		c.size += info.Size()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("artifact cache %s: %w", o.Dir, err)
	}
	c.mu.Lock()
	c.evict()
	c.mu.Unlock()
	return c, nil
}

// Dir is the local directory.
func (c *Cache) Dir() string { return c.dir }

// Stats says what the directory holds.
type Stats struct {
	Files          int
	Bytes, Evicted int64
	// UploadsFailed counts artifacts that could not be put in the store.
	UploadsFailed int64
}

// Stats says what the directory holds now, and how many artifacts it has
// evicted since it was opened.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Files: len(c.files), Bytes: c.size, Evicted: c.evicted, UploadsFailed: c.failed}
}

// Wait waits until every committed artifact has been put in the store
// (or failed to), or ctx ends.
func (c *Cache) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { c.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// uploader puts committed artifacts in the store, one at a time, for the
// cache's life.
func (c *Cache) uploader() {
	for u := range c.uploads {
		c.put(u)
	}
}

// put uploads the local file of an artifact (gone, evicted before its
// turn: nothing to upload; another researcher computes it again).
func (c *Cache) put(u upload) {
	defer c.pending.Done()
	if u.temp {
		defer os.Remove(u.path)
	}
	f, err := os.Open(u.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		var mac string
		if mac, err = c.sign(u.key, f); err == nil {
			if _, err = f.Seek(0, io.SeekStart); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), uploadTimeout)
				_, err = c.store.Put(ctx, Prefix+u.key, f, map[string]string{macProperty: mac})
				cancel()
			}
		}
		f.Close()
	}
	if err != nil {
		c.mu.Lock()
		c.failed++
		c.mu.Unlock()
		c.log.Warn("artifact not put in the blob store (kept locally; other researchers compute it again)", "artifact", u.key, "err", err)
	}
}

// macProperty is the store property that carries an artifact's MAC.
const macProperty = "archivist-mac"

// DefaultMaxFetchBytes bounds an artifact fetched from the store.
const DefaultMaxFetchBytes = 4 << 30

// sign is the MAC of the artifact at key whose bytes r reads: HMAC-SHA256
// under the cache's key, of the artifact's key and its bytes (a print
// signed for one audio is not one for another), in hex.
func (c *Cache) sign(key string, r io.Reader) (string, error) {
	m := hmac.New(sha256.New, c.key)
	io.WriteString(m, key+"\n")
	if _, err := io.Copy(m, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(m.Sum(nil)), nil
}

// uploadTimeout bounds one upload.
const uploadTimeout = 30 * time.Minute

func (c *Cache) path(key string) string { return filepath.Join(c.dir, filepath.FromSlash(key)) }

func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "..") || strings.Contains(key, "\\") || strings.Contains(key, "/.tmp-") || strings.HasPrefix(key, ".tmp-") {
		return fmt.Errorf("artifact key %q", key)
	}
	return nil
}

// Open opens the artifact at key: from the directory, or else fetched
// from the store and checked whole (a copy that fails is deleted from the
// store). It returns ErrNotFound where neither has it.
func (c *Cache) Open(ctx context.Context, key string) (*File, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	f, err := openFile(c.path(key))
	switch {
	case err == nil:
		c.touch(key)
		return f, nil
	case errors.Is(err, ErrCorrupt):
		c.log.WarnContext(ctx, "corrupt artifact in the local cache; discarded", "artifact", key, "err", err)
		c.dropLocal(key)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if c.store == nil {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return c.fetch(ctx, key)
}

// fetch copies key from the store into the directory: within the size
// bound, and kept only if its MAC is the cache key's (one that is not was
// written by something else with access to the bucket: deleted, and
// computed again).
func (c *Cache) fetch(ctx context.Context, key string) (*File, error) {
	info, err := c.store.Stat(ctx, Prefix+key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", key, err)
	}
	if info.Size > c.fetchMax {
		return nil, c.untrusted(ctx, key, fmt.Sprintf("%d bytes, more than an artifact may be (%d)", info.Size, c.fetchMax))
	}
	rc, info, err := c.store.Get(ctx, Prefix+key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", key, err)
	}
	defer rc.Close()
	tmp, err := c.temp(key)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, c.key)
	io.WriteString(m, key+"\n")
	n, err := io.Copy(io.MultiWriter(tmp, m), io.LimitReader(rc, c.fetchMax+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > c.fetchMax {
		os.Remove(tmp.Name())
		return nil, c.untrusted(ctx, key, fmt.Sprintf("more than an artifact may be (%d bytes)", c.fetchMax))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("artifact %s: fetch: %w", key, err)
	}
	if got := info.Properties[macProperty]; !hmac.Equal([]byte(got), []byte(hex.EncodeToString(m.Sum(nil)))) {
		os.Remove(tmp.Name())
		return nil, c.untrusted(ctx, key, "its MAC is not the researchers' key's (written by something else)")
	}
	f, err := openFile(tmp.Name())
	if err == nil {
		if err = f.verify(); err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
		if errors.Is(err, ErrCorrupt) {
			c.log.WarnContext(ctx, "corrupt artifact in the store; deleted, to be computed again", "artifact", key, "err", err)
			if derr := c.store.Delete(ctx, Prefix+key); derr != nil {
				c.log.WarnContext(ctx, "delete corrupt artifact", "artifact", key, "err", derr)
			}
			return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return nil, err
	}
	c.keep(key, tmp.Name())
	return f, nil
}

// untrusted deletes an artifact of the store that cannot be trusted, and
// reports it not found (computed again).
func (c *Cache) untrusted(ctx context.Context, key, why string) error {
	c.log.WarnContext(ctx, "an artifact in the store is not trusted; deleted, to be computed again", "artifact", key, "why", why)
	if err := c.store.Delete(ctx, Prefix+key); err != nil {
		c.log.WarnContext(ctx, "delete untrusted artifact", "artifact", key, "err", err)
	}
	return fmt.Errorf("%s: %w", key, ErrNotFound)
}

// temp creates a temporary file beside key's place.
func (c *Cache) temp(key string) (*os.File, error) {
	dir := filepath.Dir(c.path(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, ".tmp-")
}

// keep moves a complete file into key's place and evicts what the bound
// asks.
func (c *Cache) keep(key, tmp string) {
	st, err := os.Stat(tmp)
	if err != nil || st.Size() > c.max {
		os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, c.path(key)); err != nil {
		c.log.Warn("keep artifact", "artifact", key, "err", err)
		os.Remove(tmp)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.files[key]; ok {
		c.size -= old.size
	}
	c.files[key] = local{st.Size(), time.Now()}
	c.size += st.Size()
	c.evict()
}

// evict removes the least recently used artifacts until the directory is
// within its bound. An open File stays readable (the kernel keeps a
// removed file for those who have it open).
func (c *Cache) evict() {
	if c.size <= c.max {
		return
	}
	// Sorted once by last use: evicting k artifacts costs one sort, not k
	// scans of the directory's artifacts.
	keys := slices.SortedFunc(maps.Keys(c.files), func(a, b string) int { return c.files[a].used.Compare(c.files[b].used) })
	for _, k := range keys {
		if c.size <= c.max {
			break
		}
		if err := os.Remove(c.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("evict artifact", "artifact", k, "err", err)
		}
		c.size -= c.files[k].size
		delete(c.files, k)
		c.evicted++
	}
}

func (c *Cache) touch(key string) {
	now := time.Now()
	c.mu.Lock()
	if l, ok := c.files[key]; ok {
		l.used = now
		c.files[key] = l
	}
	c.mu.Unlock()
	_ = os.Chtimes(c.path(key), now, now) // the order survives a restart
}

func (c *Cache) dropLocal(key string) {
	os.Remove(c.path(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.files[key]; ok {
		c.size -= l.size
		delete(c.files, key)
	}
}

// MediaPrefix is the prefix of every artifact derived from the audio of
// a sha256 (of every analysis): DiscardAll of it forgets that audio.
func MediaPrefix(sha256 string) string { return strings.ToLower(sha256) + "/" }

// Discard removes key from the directory and the store: it was found
// corrupt, or what it was derived from is gone.
func (c *Cache) Discard(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	c.dropLocal(key)
	if c.store == nil {
		return nil
	}
	return c.store.Delete(ctx, Prefix+key)
}

// DiscardAll removes every artifact whose key starts with prefix (all of
// a piece of audio's, say) from the directory and the store.
func (c *Cache) DiscardAll(ctx context.Context, prefix string) error {
	if err := checkKey(prefix); err != nil {
		return err
	}
	c.mu.Lock()
	var keys []string
	for k := range c.files {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.dropLocal(k)
	}
	if c.store == nil {
		return nil
	}
	for info, err := range c.store.List(ctx, Prefix+prefix) {
		if err != nil {
			return err
		}
		if err := c.store.Delete(ctx, info.Key); err != nil {
			return err
		}
	}
	return nil
}

// Writer writes an artifact: Commit keeps it, Abort drops it.
type Writer struct {
	c    *Cache
	key  string
	tmp  *os.File
	file writeFile
	done bool
}

// Create starts writing the artifact at key.
func (c *Cache) Create(key string) (*Writer, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	tmp, err := c.temp(key)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", key, err)
	}
	w := &Writer{c: c, key: key, tmp: tmp}
	w.file.w = tmp
	return w, nil
}

// Write writes data.
func (w *Writer) Write(p []byte) (int, error) { return w.file.Write(p) }

// Commit ends the artifact with its metadata and puts it in the
// directory, from which it is uploaded to the store in the background
// (Wait waits for that; a failed upload is a warning: the artifact stays
// local, and another researcher computes it again).
func (w *Writer) Commit(ctx context.Context, meta []byte) error {
	if w.done {
		return errors.New("artifact already committed or aborted")
	}
	w.done = true
	err := w.file.finish(meta)
	if cerr := w.tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(w.tmp.Name())
		return fmt.Errorf("artifact %s: %w", w.key, err)
	}
	u := upload{key: w.key, path: w.c.path(w.key)}
	if st, err := os.Stat(w.tmp.Name()); err == nil && st.Size() > w.c.max {
		// Larger than the directory may hold: kept in the store alone,
		// uploaded from its temporary file, which goes after.
		if w.c.store == nil {
			os.Remove(w.tmp.Name())
			return nil
		}
		u = upload{key: w.key, path: w.tmp.Name(), temp: true}
	} else {
		w.c.keep(w.key, w.tmp.Name())
	}
	if w.c.store != nil {
		w.c.pending.Add(1)
		select {
		case w.c.uploads <- u:
		default:
			w.c.put(u) // the queue is full: this one goes now
		}
	}
	return nil
}

// Abort drops what was written.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.tmp.Close()
	os.Remove(w.tmp.Name())
}
