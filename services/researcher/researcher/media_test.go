package researcher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
)

// etagStore is a store whose checksums are not sha256 (as S3's ETags are
// not), counting reads.
type etagStore struct {
	blob.Store
	gets int
}

func (s *etagStore) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	s.gets++
	rc, info, err := s.Store.Get(ctx, key)
	info.Checksum = blob.Checksum{Algorithm: "s3-etag", Value: "\"x-1\""}
	return rc, info, err
}

// TestMediaIsCheckedAgainstItsSHA256: audio whose bytes are not the ones
// the catalog's sha256 names is refused as a fault of the audio (parked,
// not retried), whether the store keeps sha256 checksums or the bytes must
// be hashed; a match hashed once is remembered.
func TestMediaIsCheckedAgainstItsSHA256(t *testing.T) {
	ctx := context.Background()
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("RIFF and some audio")
	if _, err := local.Put(ctx, "audio/a", bytes.NewReader(body), nil); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	good := events.AudioRef{Key: "src:a", Media: events.Media{Key: "audio/a", SHA256: hex.EncodeToString(sum[:])}}
	bad := good
	bad.Media.SHA256 = hex.EncodeToString(make([]byte, 32))
	etags := &etagStore{Store: local}
	for name, bs := range map[string]blob.Store{"sha256 store": local, "etag store": etags} {
		r := &Researcher{blob: bs}
		rc, err := r.openMedia(ctx, good)
		if err != nil {
			t.Fatalf("%s: matching media: %v", name, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, body) {
			t.Errorf("%s: read %q", name, got)
		}
		_, err = r.openMedia(ctx, bad)
		var mm *MediaMismatchError
		if !errors.As(err, &mm) || !IsClipFault(err) || mm.Got != good.Media.SHA256 {
			t.Errorf("%s: mismatching media: %v, want a MediaMismatchError that is a clip fault", name, err)
		}
		if _, err := r.openMedia(ctx, good); err != nil {
			t.Fatal(err)
		}
	}
	// The etag store: hashed once (2 reads), then one read per open: 2 + 1
	// for the mismatch (hashed, refused) + 1 for the remembered match.
	if etags.gets != 4 {
		t.Errorf("%d reads of the etag store, want 4", etags.gets)
	}
}

func TestMain(m *testing.M) { testenv.Main(m) }

// TestMediaDigestNamesTheBytes: the name that keys an audio's prints is
// its declared sha256; without one, the store's own sha256 (the local
// store), or a digest of what a real S3 server (MinIO) says of the object,
// which stays while the object does and changes when other bytes are
// written under its key; a missing object is an error, as opening it is.
func TestMediaDigestNamesTheBytes(t *testing.T) {
	ctx := context.Background()
	body, other := []byte("RIFF and some audio"), []byte("RIFF and other audio")
	sum := sha256.Sum256(body)
	ref := events.AudioRef{Key: "src:a", Media: events.Media{Key: "audio/a"}}
	declared := ref
	declared.Media.SHA256 = strings.ToUpper(hex.EncodeToString(make([]byte, 32)))
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s3, _ := testenv.MinIOBucket(t, "")
	for name, bs := range map[string]blob.Store{"local": local, "s3": s3} {
		if _, err := MediaDigest(ctx, bs, ref); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s: a missing object: %v, want not found", name, err)
		}
		if _, err := bs.Put(ctx, "audio/a", bytes.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
		first, err := MediaDigest(ctx, bs, ref)
		if err != nil || !sha256Hex.MatchString(first) {
			t.Fatalf("%s: %q, %v", name, first, err)
		}
		if name == "local" && first != hex.EncodeToString(sum[:]) {
			t.Errorf("local: %s, want the store's sha256 of the bytes", first)
		}
		if again, err := MediaDigest(ctx, bs, ref); err != nil || again != first {
			t.Errorf("%s: the same object named %s then %s (%v)", name, first, again, err)
		}
		if d, err := MediaDigest(ctx, bs, declared); err != nil || d != strings.ToLower(declared.Media.SHA256) {
			t.Errorf("%s: a declared sha256 named %q (%v), want it", name, d, err)
		}
		if _, err := bs.Put(ctx, "audio/a", bytes.NewReader(other), nil); err != nil {
			t.Fatal(err)
		}
		if next, err := MediaDigest(ctx, bs, ref); err != nil || next == first {
			t.Errorf("%s: other bytes under the key named %s, as the first were (%v)", name, next, err)
		}
	}
}
