package researcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
)

// MediaMismatchError is audio whose bytes are not the ones the catalog's
// sha256 names: another file was stored under its key, or it went sour.
// Retrying cannot cure it; the work is parked until its media changes.
type MediaMismatchError struct {
	Key, Want, Got string
}

func (e *MediaMismatchError) Error() string {
	return fmt.Sprintf("sha256 mismatch: %s has sha256 %s, the catalog says %s", e.Key, e.Got, e.Want)
}

// verifiedMedia remembers objects whose bytes were hashed and matched, by
// key, declared sha256 and the store's own size and checksum, so that a
// clip researched in many episodes is hashed once. Bounded: it is emptied
// when full.
type verifiedMedia struct {
	mu   sync.Mutex
	seen map[string]bool
}

const maxVerifiedMedia = 10000

func (v *verifiedMedia) has(k string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[k]
}

func (v *verifiedMedia) add(k string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil || len(v.seen) >= maxVerifiedMedia {
		v.seen = map[string]bool{}
	}
	v.seen[k] = true
}

// openMedia opens ref's audio, first checking its bytes against the sha256
// the catalog declares (if any). A store that keeps sha256 checksums (the
// local store) is trusted for it; otherwise the object is read through a
// hash once (and remembered) before it is opened again for decoding.
func (r *Researcher) openMedia(ctx context.Context, ref events.AudioRef) (io.ReadCloser, error) {
	rc, info, err := r.blob.Get(ctx, ref.Media.Key)
	if err != nil {
		return nil, fmt.Errorf("audio of %s: %w", ref.Key, err)
	}
	want := strings.ToLower(ref.Media.SHA256)
	if want == "" {
		return rc, nil
	}
	if err := storeMismatch(ref, info); err != nil {
		rc.Close()
		return nil, err
	}
	if info.Checksum.Algorithm == "sha256" {
		return rc, nil // the store's own sha256 is the declared one
	}
	seen := fmt.Sprintf("%s\x00%s\x00%d\x00%s", ref.Media.Key, want, info.Size, info.Checksum)
	if r.verified.has(seen) {
		return rc, nil
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("audio of %s: hash %s: %w", ref.Key, ref.Media.Key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, mismatchError(ref, got)
	}
	r.verified.add(seen)
	rc, _, err = r.blob.Get(ctx, ref.Media.Key)
	if err != nil {
		return nil, fmt.Errorf("audio of %s: %w", ref.Key, err)
	}
	return rc, nil
}

// checkMedia tells whether ref's audio is in the store and, where the
// store keeps a sha256 of it (the local store; S3 objects put with one),
// whether that is the sha256 the catalog declares: what openMedia checks,
// without reading the object.
func (r *Researcher) checkMedia(ctx context.Context, ref events.AudioRef) error {
	info, err := r.blob.Stat(ctx, ref.Media.Key)
	if err != nil {
		return fmt.Errorf("audio of %s: %w", ref.Key, err)
	}
	return storeMismatch(ref, info)
}

// storeMismatch is the mismatch error where the store keeps a sha256 of
// ref's object and it is not the one the catalog declares (nil otherwise).
func storeMismatch(ref events.AudioRef, info blob.Info) error {
	if want := strings.ToLower(ref.Media.SHA256); want != "" && info.Checksum.Algorithm == "sha256" && info.Checksum.Value != want {
		return mismatchError(ref, info.Checksum.Value)
	}
	return nil
}

// mismatchError says that ref's object has sha256 got, not the declared one.
func mismatchError(ref events.AudioRef, got string) error {
	return fmt.Errorf("audio of %s: %w", ref.Key, &MediaMismatchError{Key: ref.Media.Key, Want: strings.ToLower(ref.Media.SHA256), Got: got})
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// MediaDigest names the bytes of ref's audio by a sha256 in hex: the one
// the catalog declares; else the store's own sha256 of the object (the
// local store; S3 objects put with one); else a digest of what the store
// says of the object (its key, size, checksum and time written: S3's
// ETag or CRC, which change whenever the object is written again). So a
// record without a sha256 costs no more analysis than one with: its
// audio is analysed once, and again only once its object is replaced. A
// store that says nothing of the object names nothing ("").
func MediaDigest(ctx context.Context, store blob.Store, ref events.AudioRef) (string, error) {
	if sha256Hex.MatchString(ref.Media.SHA256) {
		return strings.ToLower(ref.Media.SHA256), nil
	}
	info, err := store.Stat(ctx, ref.Media.Key)
	if err != nil {
		return "", fmt.Errorf("audio of %s: %w", ref.Key, err)
	}
	switch {
	case info.Checksum.Algorithm == "sha256" && sha256Hex.MatchString(info.Checksum.Value):
		return strings.ToLower(info.Checksum.Value), nil
	case info.Checksum.Value == "":
		return "", nil
	}
	h := sha256.Sum256(fmt.Appendf(nil, "object\x00%s\x00%d\x00%s\x00%d", ref.Media.Key, info.Size, info.Checksum, info.Modified.UnixNano()))
	return hex.EncodeToString(h[:]), nil
}
