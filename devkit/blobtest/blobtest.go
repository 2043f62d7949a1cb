// Package blobtest is the test suite every blob.Store implementation must pass.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
)

// Run runs the suite against stores made by open; each call must return an
// empty store.
func Run(t *testing.T, open func(t *testing.T) blob.Store) {
	ctx := context.Background()

	t.Run("PutGetStat", func(t *testing.T) {
		s := open(t)
		data := randomBytes(3<<20 + 17)
		info, err := s.Put(ctx, "audio/ep 1.mp3", bytes.NewReader(data), map[string]string{"content-type": "audio/mpeg"})
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(data)) {
			t.Errorf("put size %d, want %d", info.Size, len(data))
		}
		checkChecksum(t, info.Checksum, data)
		st, err := s.Stat(ctx, "audio/ep 1.mp3")
		if err != nil {
			t.Fatal(err)
		}
		if st.Size != info.Size || st.Checksum != info.Checksum {
			t.Errorf("stat %+v differs from put %+v", st, info)
		}
		if st.Properties["content-type"] != "audio/mpeg" {
			t.Errorf("properties %v", st.Properties)
		}
		rc, gi, err := s.Get(ctx, "audio/ep 1.mp3")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get returned %d bytes (%v), want the %d put", len(got), err, len(data))
		}
		if gi.Checksum != info.Checksum {
			t.Errorf("get checksum %v, want %v", gi.Checksum, info.Checksum)
		}
	})

	t.Run("StatedSHA256", func(t *testing.T) {
		// A put stating its content's SHA-256 (blob.PropSHA256): stored,
		// its checksum still digests the content, and the statement is not
		// a property. A store that can check it refuses a wrong one,
		// keeping nothing; every store's checksum, where it digests the
		// content, says the truth, which is what an audit compares.
		s := open(t)
		// One request each, and a multipart upload on S3 (a reader of
		// unknown length).
		for _, c := range []struct {
			size  int
			sized bool
		}{{1000, true}, {17 << 20, true}, {17 << 20, false}} {
			size := c.size
			data := randomBytes(size)
			sum := sha256.Sum256(data)
			var r io.Reader = bytes.NewReader(data)
			if !c.sized {
				r = io.MultiReader(r)
			}
			info, err := s.Put(ctx, "stated", r, map[string]string{blob.PropSHA256: hex.EncodeToString(sum[:]), "note": "x"})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Stat(ctx, "stated")
			if err != nil {
				t.Fatal(err)
			}
			if st.Checksum.Algorithm == "s3-etag" {
				t.Errorf("%d bytes: the store's checksum digests nothing though the put stated the sha256", size)
			}
			checkChecksum(t, st.Checksum, data)
			if _, ok := st.Properties[blob.PropSHA256]; ok || st.Properties["note"] != "x" || info.Checksum != st.Checksum {
				t.Errorf("%d bytes: properties %v, checksum %v / %v", size, st.Properties, info.Checksum, st.Checksum)
			}
		}
		for _, r := range []io.Reader{strings.NewReader("abc"), io.MultiReader(strings.NewReader("abc"))} {
			_, err := s.Put(ctx, "wrong", r, map[string]string{blob.PropSHA256: strings.Repeat("0", 64)})
			switch {
			case errors.Is(err, blob.ErrChecksumMismatch):
				if _, err := s.Stat(ctx, "wrong"); !errors.Is(err, blob.ErrNotFound) {
					t.Errorf("a refused put left an object: %v", err)
				}
			case err != nil:
				t.Errorf("a wrong statement: %v, want ErrChecksumMismatch", err)
			}
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		s := open(t)
		put(t, s, "k", "first")
		info := put(t, s, "k", "second, longer")
		checkChecksum(t, info.Checksum, []byte("second, longer"))
		if got := read(t, s, "k"); got != "second, longer" {
			t.Errorf("read %q", got)
		}
	})

	t.Run("VersionsAreCreateOnly", func(t *testing.T) {
		// Under blob.ImmutablePrefix a key, once it holds an object, keeps
		// it: other bytes are refused and change nothing; the same bytes
		// (a retry) answer with what is there; only Restore, stating the
		// recorded SHA-256, puts bytes back over it.
		s := open(t)
		const key = "objects/ark:%2F99999%2Ffk4x/v1/producer/a.txt"
		first := put(t, s, key, "the version's bytes")
		again, err := s.Put(ctx, key, strings.NewReader("the version's bytes"), nil)
		if err != nil || again.Checksum != first.Checksum {
			t.Fatalf("a retry of the same bytes: %+v, %v; want the stored object", again, err)
		}
		sum := sha256.Sum256([]byte("the version's bytes"))
		if _, err := s.Put(ctx, key, strings.NewReader("the version's bytes"), map[string]string{blob.PropSHA256: hex.EncodeToString(sum[:])}); err != nil {
			t.Fatalf("a retry stating its sha256: %v", err)
		}
		for _, other := range []string{"other bytes", "the version's byteS", ""} {
			if _, err := s.Put(ctx, key, strings.NewReader(other), nil); !errors.Is(err, blob.ErrExists) {
				t.Errorf("put %q over a stored version: %v, want ErrExists", other, err)
			}
		}
		big := randomBytes(9 << 20) // a multipart upload on S3
		if _, err := s.Put(ctx, key, io.MultiReader(bytes.NewReader(big)), nil); !errors.Is(err, blob.ErrExists) {
			t.Errorf("a streamed put over a stored version: %v, want ErrExists", err)
		}
		if got := read(t, s, key); got != "the version's bytes" {
			t.Fatalf("the stored version changed: it now reads %d bytes", len(got))
		}
		// A streamed version of its own, and its retry.
		const bigKey = "objects/ark:%2F99999%2Ffk4x/v1/producer/big.bin"
		if _, err := s.Put(ctx, bigKey, io.MultiReader(bytes.NewReader(big)), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, bigKey, io.MultiReader(bytes.NewReader(big)), nil); err != nil {
			t.Errorf("a streamed retry of the same bytes: %v", err)
		}
		// Rot, then a restore of the recorded bytes.
		if _, err := blob.Restore(ctx, s, key, strings.NewReader("not recorded"), hex.EncodeToString(sum[:])); !errors.Is(err, blob.ErrChecksumMismatch) {
			t.Errorf("restore of bytes that are not the recorded ones: %v, want ErrChecksumMismatch", err)
		}
		if _, err := blob.Restore(ctx, s, key, strings.NewReader("the version's bytes"), ""); err == nil {
			t.Error("restore without the recorded sha256: no error")
		}
		if _, err := blob.Restore(ctx, s, key, strings.NewReader("the version's bytes"), hex.EncodeToString(sum[:])); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if got := read(t, s, key); got != "the version's bytes" {
			t.Fatalf("restored, it reads %d bytes, not the recorded ones", len(got))
		}
		// Of several writers racing for one version key, one wins whole.
		const raced = "objects/ark:%2F99999%2Ffk4y/v1/producer/raced"
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := map[string]bool{}
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := strings.Repeat(string(rune('a'+i)), 1<<14)
				_, err := s.Put(ctx, raced, strings.NewReader(body), nil)
				switch {
				case err == nil:
					mu.Lock()
					won[body] = true
					mu.Unlock()
				case !errors.Is(err, blob.ErrExists):
					t.Errorf("racing put: %v", err)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("%d racing writers of one version key succeeded, want 1", len(won))
		}
		for body := range won {
			if got := read(t, s, raced); got != body {
				t.Errorf("the key holds %d bytes of another writer than the one that won", len(got))
			}
		}
		// A withdrawal deletes; the key may then be created again.
		if err := s.Delete(ctx, raced); err != nil {
			t.Fatal(err)
		}
		put(t, s, raced, "after a delete")
	})

	t.Run("NotFound", func(t *testing.T) {
		s := open(t)
		if _, err := s.Stat(ctx, "missing/key"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("stat: %v, want ErrNotFound", err)
		}
		if _, _, err := s.Get(ctx, "missing/key"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("get: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, "missing/key"); err != nil {
			t.Errorf("delete missing: %v", err)
		}
	})

	t.Run("ListByPrefix", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"warc/b.warc.gz", "warc/a.warc.gz", "warc/2026/c.arc.gz", "warcs-other/x", "audio/x.mp3"} {
			put(t, s, k, k)
		}
		var keys []string
		for info, err := range s.List(ctx, "warc/") {
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != int64(len(info.Key)) {
				t.Errorf("%s: size %d", info.Key, info.Size)
			}
			keys = append(keys, info.Key)
		}
		if got, want := strings.Join(keys, ","), "warc/2026/c.arc.gz,warc/a.warc.gz,warc/b.warc.gz"; got != want {
			t.Errorf("list warc/ = %s, want %s", got, want)
		}
		n := 0
		for _, err := range s.List(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 5 {
			t.Errorf("list all: %d objects, want 5", n)
		}
	})

	t.Run("ListAfterPages", func(t *testing.T) {
		// Pages of a listing resumed after the last key, in byte order
		// (where "a-b" sorts before "a/b", unlike a walk of directories).
		s := open(t)
		keys := []string{"o/a-b", "o/a/b", "o/a/c/d", "o/a0", "o/b-1", "o/b/z", "o/c", "other/x"}
		for _, k := range keys {
			if _, err := s.Put(ctx, k, strings.NewReader(k), nil); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			page, err := blob.ListAfter(ctx, s, "o/", after, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, info := range page {
				got = append(got, info.Key)
			}
			if len(page) < 3 || pages > 10 {
				break
			}
			after = page[len(page)-1].Key
		}
		want := []string{"o/a-b", "o/a/b", "o/a/c/d", "o/a0", "o/b-1", "o/b/z", "o/c"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("pages of 3: %v, want %v", got, want)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := open(t)
		put(t, s, "a/b", "x")
		if err := s.Delete(ctx, "a/b"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "a/b"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("stat after delete: %v", err)
		}
		for range s.List(ctx, "") {
			t.Error("listing after delete is not empty")
		}
	})

	t.Run("BadKeys", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"", "/etc/passwd", "../escape", "a/../../b", "a//b", "a/./b", "a\\b", "a\x00b", ".archivist-meta/x"} {
			if _, err := s.Put(ctx, k, strings.NewReader("x"), nil); err == nil {
				t.Errorf("put %q: no error", k)
			}
			if _, err := s.Stat(ctx, k); err == nil || errors.Is(err, blob.ErrNotFound) {
				t.Errorf("stat %q: %v, want a key error", k, err)
			}
		}
	})

	t.Run("ConcurrentPutsOfOneKey", func(t *testing.T) {
		s := open(t)
		var wg sync.WaitGroup
		bodies := []string{strings.Repeat("a", 1<<16), strings.Repeat("b", 1<<17), strings.Repeat("c", 1<<15)}
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Put(ctx, "race", strings.NewReader(bodies[i%3]), nil); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got := read(t, s, "race")
		ok := false
		for _, b := range bodies {
			ok = ok || got == b
		}
		if !ok {
			t.Errorf("object is a mix of writes (%d bytes)", len(got))
		}
		info, err := s.Stat(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		checkChecksum(t, info.Checksum, []byte(got))
	})
}

func put(t *testing.T, s blob.Store, key, body string) blob.Info {
	t.Helper()
	info, err := s.Put(context.Background(), key, strings.NewReader(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func read(t *testing.T, s blob.Store, key string) string {
	t.Helper()
	rc, _, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkChecksum checks a store checksum against the content, by its algorithm.
func checkChecksum(t *testing.T, c blob.Checksum, data []byte) {
	t.Helper()
	var want string
	switch c.Algorithm {
	case "sha256", "md5", "crc64nvme":
		h := blob.NewHash(c.Algorithm)
		h.Write(data)
		want = hex.EncodeToString(h.Sum(nil))
	case "s3-etag":
		if c.Value == "" {
			t.Error("empty multipart etag")
		}
		return
	default:
		t.Fatalf("unknown checksum algorithm %q", c.Algorithm)
	}
	if c.Value != want {
		t.Errorf("checksum %s, want %s:%s", c, c.Algorithm, want)
	}
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
