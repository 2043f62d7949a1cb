package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/researcher/artifact"
)

func data(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func newCache(t *testing.T, dir string, max int64, store blob.Store) *artifact.Cache {
	t.Helper()
	c, err := artifact.New(artifact.Options{Dir: dir, MaxBytes: max, Store: store, Key: []byte("a test key of the researchers")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func put(t *testing.T, c *artifact.Cache, key string, b, meta []byte) {
	t.Helper()
	w, err := c.Create(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background(), meta); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(context.Background()); err != nil { // in the store too
		t.Fatal(err)
	}
}

func read(t *testing.T, c *artifact.Cache, key string) ([]byte, []byte, error) {
	t.Helper()
	f, err := c.Open(context.Background(), key)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f.Reader())
	return b, f.Meta(), err
}

// TestArtifactsRoundTrip: what is written (of any length, across chunks)
// is read back, with its metadata, from the directory, and from the store
// by another researcher whose directory does not have it.
func TestArtifactsRoundTrip(t *testing.T) {
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := newCache(t, t.TempDir(), 1<<30, store)
	b := newCache(t, t.TempDir(), 1<<30, store)
	for _, n := range []int{0, 1, artifact.ChunkSize, 3*artifact.ChunkSize + 17} {
		key := fmt.Sprintf("locate/v1/ab/%d", n)
		want := data(n, byte(n))
		put(t, a, key, want, []byte(fmt.Sprint("meta ", n)))
		for name, c := range map[string]*artifact.Cache{"local": a, "fetched": b} {
			got, meta, err := read(t, c, key)
			if err != nil || !bytes.Equal(got, want) || string(meta) != fmt.Sprint("meta ", n) {
				t.Errorf("%s, %d bytes: read %d bytes, meta %q, %v", name, n, len(got), meta, err)
			}
			f, err := c.Open(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if whole, err := f.Bytes(); err != nil || !bytes.Equal(whole, want) {
				t.Errorf("%s, %d bytes: read whole %d bytes, %v", name, n, len(whole), err)
			}
			f.Close()
		}
	}
	if _, err := a.Open(context.Background(), "locate/v1/none"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("a missing artifact: %v, want ErrNotFound", err)
	}
	if _, err := a.Create("../escape"); err == nil {
		t.Error("a key out of the directory was taken")
	}
}

// TestCorruptArtifactsAreNeverTrusted: a flipped byte in the local copy
// fails the read that meets it and the next Open, which discards the copy
// and fetches the store's; a corrupt copy in the store is deleted there,
// and the artifact is not found (to be computed again).
func TestCorruptArtifactsAreNeverTrusted(t *testing.T) {
	ctx := context.Background()
	storeDir, dir := t.TempDir(), t.TempDir()
	store, err := blob.NewLocal(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, dir, 1<<30, store)
	want := data(2*artifact.ChunkSize+5, 1)
	put(t, c, "locate/v1/cd/print", want, nil)
	flip := func(path string, at int64) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		f.ReadAt(b[:], at)
		b[0] ^= 0x10
		f.WriteAt(b[:], at)
		f.Close()
	}
	localPath := filepath.Join(dir, "locate/v1/cd/print")
	f, err := c.Open(ctx, "locate/v1/cd/print")
	if err != nil {
		t.Fatal(err)
	}
	flip(localPath, artifact.ChunkSize+100)
	buf := make([]byte, 10)
	if _, err := f.ReadAt(buf, artifact.ChunkSize+95); !errors.Is(err, artifact.ErrCorrupt) {
		t.Errorf("reading a flipped byte: %v, want ErrCorrupt", err)
	}
	if b, err := f.Bytes(); !errors.Is(err, artifact.ErrCorrupt) || b != nil {
		t.Errorf("reading whole with a flipped byte: %d bytes, %v, want none and ErrCorrupt", len(b), err)
	}
	f.Close()
	// The footer flipped: the next Open discards the local copy and
	// fetches the store's.
	st, _ := os.Stat(localPath)
	flip(localPath, st.Size()-20)
	if got, _, err := read(t, c, "locate/v1/cd/print"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after a corrupt local copy: %d bytes, %v", len(got), err)
	}
	// The store's copy corrupt, the local one gone: not found, and the
	// store's copy deleted.
	if err := os.Remove(localPath); err != nil {
		t.Fatal(err)
	}
	flip(filepath.Join(storeDir, artifact.Prefix+"locate/v1/cd/print"), 3)
	c2 := newCache(t, t.TempDir(), 1<<30, store)
	if _, err := c2.Open(ctx, "locate/v1/cd/print"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("a corrupt copy in the store: %v, want ErrNotFound", err)
	}
	if _, err := store.Stat(ctx, artifact.Prefix+"locate/v1/cd/print"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("the corrupt copy is still in the store: %v", err)
	}
}

// TestTheLocalCacheIsBounded: the directory keeps within its bound,
// dropping the least recently used, across a restart too; what it drops
// is still in the store.
func TestTheLocalCacheIsBounded(t *testing.T) {
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const each = 100 << 10
	c := newCache(t, dir, 5*each, store)
	for i := range 20 {
		put(t, c, fmt.Sprintf("locate/v1/%02d/print", i), data(each-40, byte(i)), nil)
		if i == 10 {
			if _, _, err := read(t, c, "locate/v1/08/print"); err != nil { // used: kept
				t.Fatal(err)
			}
		}
		if s := c.Stats(); s.Bytes > 5*each {
			t.Fatalf("after %d artifacts the directory holds %d bytes, bound %d", i+1, s.Bytes, 5*each)
		}
	}
	s := c.Stats()
	if s.Files < 4 || s.Evicted < 15 {
		t.Errorf("stats %+v: want 4 or 5 kept, the rest evicted", s)
	}
	var size int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, _ error) error {
		if info != nil && !info.IsDir() {
			size += info.Size()
		}
		return nil
	})
	if size > 5*each {
		t.Errorf("the directory holds %d bytes, bound %d", size, 5*each)
	}
	// Reopened with a smaller bound, it evicts at once.
	c = newCache(t, dir, 2*each, store)
	if s := c.Stats(); s.Bytes > 2*each {
		t.Errorf("reopened: %+v, bound %d", s, 2*each)
	}
	if got, _, err := read(t, c, "locate/v1/00/print"); err != nil || len(got) != each-40 {
		t.Errorf("an evicted artifact from the store: %d bytes, %v", len(got), err)
	}
}

// TestConcurrentWritersOfOneArtifact: researchers computing one artifact
// at once all commit, and it is whole afterwards.
func TestConcurrentWritersOfOneArtifact(t *testing.T) {
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := data(artifact.ChunkSize+3, 9)
	var wg sync.WaitGroup
	caches := []*artifact.Cache{newCache(t, t.TempDir(), 1<<30, store), newCache(t, t.TempDir(), 1<<30, store)}
	for i := range 6 {
		c := caches[i%2]
		wg.Go(func() {
			w, err := c.Create("locate/v1/ee/print")
			if err != nil {
				t.Error(err)
				return
			}
			w.Write(want)
			if err := w.Commit(context.Background(), []byte("m")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, c := range caches {
		c.Wait(context.Background())
	}
	for _, c := range append(caches, newCache(t, t.TempDir(), 1<<30, store)) {
		if got, _, err := read(t, c, "locate/v1/ee/print"); err != nil || !bytes.Equal(got, want) {
			t.Errorf("after concurrent writers: %d bytes, %v", len(got), err)
		}
	}
}

// TestDiscardingAMediaForgetsItEverywhere: DiscardAll of a media's prefix
// removes its artifacts from the directory and the store, and no other
// media's.
func TestDiscardingAMediaForgetsItEverywhere(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, t.TempDir(), 1<<30, store)
	gone, kept := artifact.MediaPrefix("AB"+strings.Repeat("0", 62)), artifact.MediaPrefix("cd"+strings.Repeat("0", 62))
	for _, k := range []string{gone + "locate/v1/clip", gone + "locate/v2/low.print", kept + "locate/v1/clip"} {
		put(t, c, k, data(10, 1), nil)
	}
	if err := c.DiscardAll(ctx, gone); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{gone + "locate/v1/clip", gone + "locate/v2/low.print"} {
		if _, err := c.Open(ctx, k); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("%s after discarding its media: %v", k, err)
		}
	}
	if _, _, err := read(t, c, kept+"locate/v1/clip"); err != nil {
		t.Errorf("another media's artifact: %v", err)
	}
	if s := c.Stats(); s.Files != 1 {
		t.Errorf("the directory holds %d artifacts, want 1", s.Files)
	}
}

// TestPlantedArtifactsAreNeverReplayed (N25): an artifact another writer
// of the bucket put under derived/ (well formed, CRCs and all, as a
// compromised pod can make one) has no MAC under the researchers' key: a
// researcher deletes it and reports it not found (computed again), and
// never reads it; one signed by a key of its own is refused alike; one
// larger than the bound is refused before a byte of it is copied; and a
// cache without a key takes no shared store.
func TestPlantedArtifactsAreNeverReplayed(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A forger's own cache, with its own key, makes a well-formed print.
	forger, err := artifact.New(artifact.Options{Dir: t.TempDir(), MaxBytes: 1 << 30, Store: store, Key: []byte("the forger's own key, not ours")})
	if err != nil {
		t.Fatal(err)
	}
	put(t, forger, "locate/v1/ab/forged", data(1000, 1), []byte("forged"))
	// And copies it in place with no MAC at all.
	rc, _, err := store.Get(ctx, artifact.Prefix+"locate/v1/ab/forged")
	if err != nil {
		t.Fatal(err)
	}
	planted, _ := io.ReadAll(rc)
	rc.Close()
	if _, err := store.Put(ctx, artifact.Prefix+"locate/v1/ab/planted", bytes.NewReader(planted), nil); err != nil {
		t.Fatal(err)
	}
	// A huge one.
	if _, err := store.Put(ctx, artifact.Prefix+"locate/v1/ab/huge", bytes.NewReader(make([]byte, 2<<20)), nil); err != nil {
		t.Fatal(err)
	}
	c, err := artifact.New(artifact.Options{Dir: t.TempDir(), MaxBytes: 1 << 30, Store: store, Key: []byte("a test key of the researchers"), MaxFetchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"locate/v1/ab/forged", "locate/v1/ab/planted", "locate/v1/ab/huge"} {
		if _, _, err := read(t, c, key); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("%s: %v, want not found (not trusted)", key, err)
		}
		if _, err := store.Stat(ctx, artifact.Prefix+key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s is still in the store: %v", key, err)
		}
	}
	// The researchers' own is trusted.
	ours := newCache(t, t.TempDir(), 1<<30, store)
	put(t, ours, "locate/v1/ab/ours", data(1000, 2), []byte("ours"))
	if got, _, err := read(t, c, "locate/v1/ab/ours"); err != nil || !bytes.Equal(got, data(1000, 2)) {
		t.Errorf("the researchers' own artifact: %v", err)
	}
	if _, err := artifact.New(artifact.Options{Dir: t.TempDir(), MaxBytes: 1 << 30, Store: store}); err == nil {
		t.Error("a cache took a shared store without a key")
	}
}

// TestAnArtifactLargerThanTheDirectoryIsKeptInTheStore: an artifact
// larger than the directory's bound is not kept there, but is put in the
// store (it was removed before its upload could read it, and kept
// nowhere), from which another researcher reads it; no temporary file is
// left behind.
func TestAnArtifactLargerThanTheDirectoryIsKeptInTheStore(t *testing.T) {
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	small := newCache(t, dir, 1000, store)
	want := data(3*artifact.ChunkSize+5, 9)
	put(t, small, "locate/v1/cd/large", want, []byte("meta"))
	got, meta, err := read(t, newCache(t, t.TempDir(), 1<<30, store), "locate/v1/cd/large")
	if err != nil || !bytes.Equal(got, want) || string(meta) != "meta" {
		t.Fatalf("from the store: %d bytes, meta %q, %v; want %d bytes", len(got), meta, err, len(want))
	}
	if st := small.Stats(); st.Bytes > 1000 {
		t.Errorf("the directory holds %d bytes, bound 1000", st.Bytes)
	}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left in the directory: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
