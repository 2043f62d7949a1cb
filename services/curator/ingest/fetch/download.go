package fetch

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
)

func newHash(alg string) hash.Hash {
	switch alg {
	case "md5":
		return md5.New()
	case "sha1", "sha-1":
		return sha1.New()
	case "sha512", "sha-512":
		return sha512.New()
	}
	return sha256.New()
}

// Download downloads one file with retries, filling in its size and sha256.
func (c *Client) Download(ctx context.Context, f *ingest.File, dst string) error {
	if err := c.Allowed(f.URL); err != nil {
		return fault.Permanent(fmt.Errorf("%s: %w", f.Name, err))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	var last error
	for try := range max(c.cfg.Retries, 1) {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try*try) * 200 * time.Millisecond):
			}
		}
		err := c.downloadOnce(ctx, f, dst)
		if errors.Is(err, daemon.ErrFenced) {
			return err
		}
		var bad *badContent
		if errors.As(err, &bad) {
			return fault.Permanent(err) // a wrong digest is not retried: the spec fails the job at once
		}
		if err == nil || fault.IsPermanent(err) {
			return err
		}
		last = err
	}
	return fmt.Errorf("%s: %w (after %d tries)", f.Name, last, max(c.cfg.Retries, 1))
}

// roomCheck, written to beside a download whose size the manifest did not
// declare, checks the working area's free space every 64 MiB once the
// bytes exceed the room reserved for them (what its HEAD reported): below
// INGEST_MIN_FREE_BYTES the download stops (tried again later, once there
// is room), so a file whose size nobody knew, or whose HEAD said less,
// cannot fill the disk the other jobs reserved.
type roomCheck struct {
	dir       string
	min       int64
	name      string
	reserved  int64
	written   int64
	sinceLast int64
}

// roomCheckEvery is how many bytes beyond its reservation a download
// writes between checks of the working area's free space.
const roomCheckEvery = 64 << 20

func (r *roomCheck) Write(p []byte) (int, error) {
	r.written += int64(len(p))
	if r.written <= r.reserved {
		return len(p), nil
	}
	r.sinceLast += int64(len(p))
	if r.sinceLast < roomCheckEvery {
		return len(p), nil
	}
	r.sinceLast = 0
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", r.dir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < r.min {
		return 0, fmt.Errorf("%s stopped after %d bytes (%d reserved for it): the working area has %d bytes free, less than INGEST_MIN_FREE_BYTES (%d); tried again when there is room",
			r.name, r.written, r.reserved, free, r.min)
	}
	return len(p), nil
}

type badContent struct{ msg string }

func (b *badContent) Error() string { return b.msg }

func (c *Client) downloadOnce(ctx context.Context, f *ingest.File, dst string) error {
	for _, said := range []struct {
		n   int64
		who string
	}{{f.Size, "the manifest says"}, {f.Reported, "its HEAD reported"}} {
		if said.n > c.cfg.MaxFileBytes {
			return &badContent{fmt.Sprintf("%s: %s %d bytes, more than INGEST_MAX_FILE_BYTES (%d)", f.Name, said.who, said.n, c.cfg.MaxFileBytes)}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return originStatus(fmt.Errorf("GET %s: %s", f.URL, resp.Status), resp.StatusCode)
	}
	// Written under a temporary name of its own and renamed into place
	// once whole and checked, while the claim holds: a worker that lost its
	// claim (its session gone with a failover) never writes over what the
	// job's new holder downloads.
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-*")
	if err != nil {
		return err
	}
	tmp := out.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	sum := sha256.New()
	w := []io.Writer{out, sum}
	var declared hash.Hash
	if f.Digest != "" && f.DigestAlg != "" {
		if alg := strings.ReplaceAll(f.DigestAlg, "-", ""); alg == "sha256" {
			declared = sum // one hash serves both
		} else {
			declared = newHash(f.DigestAlg)
			w = append(w, declared)
		}
	}
	// Never more than the manifest's size, nor than INGEST_MAX_FILE_BYTES;
	// and beyond the room reserved for it (what its HEAD reported, or
	// nothing when no size was known) only while the working area keeps
	// INGEST_MIN_FREE_BYTES free, checked as the bytes arrive.
	limit, what := c.cfg.MaxFileBytes, "INGEST_MAX_FILE_BYTES"
	if f.Size > 0 && f.Size < limit {
		limit, what = f.Size, "the manifest's size"
	}
	if resp.ContentLength > limit {
		return &badContent{fmt.Sprintf("%s: the origin announces %d bytes, more than %s (%d)", f.Name, resp.ContentLength, what, limit)}
	}
	if f.Size <= 0 {
		w = append(w, &roomCheck{dir: c.cfg.WorkDir, min: c.cfg.MinFreeBytes, name: f.Name, reserved: max(f.Reported, 0)})
	}
	n, err := teeCopy(io.LimitReader(resp.Body, limit+1), w...)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > limit {
		return &badContent{fmt.Sprintf("%s: more bytes than %s (%d)", f.Name, what, limit)}
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%s: %d bytes of %d", f.Name, n, resp.ContentLength)
	}
	if f.Size > 0 && n != f.Size {
		return &badContent{fmt.Sprintf("%s: %d bytes, the manifest says %d", f.Name, n, f.Size)}
	}
	if declared != nil {
		if got := hex.EncodeToString(declared.Sum(nil)); got != f.Digest {
			return &badContent{fmt.Sprintf("%s: %s digest %s, the manifest says %s", f.Name, f.DigestAlg, got, f.Digest)}
		}
	}
	if err := daemon.FenceEach(ctx); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	f.Size, f.SHA256 = n, hex.EncodeToString(sum.Sum(nil))
	ok = true
	return nil
}
