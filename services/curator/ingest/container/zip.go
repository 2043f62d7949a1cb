// Package container checks and unpacks a depositor's zip container:
// its central directory is checked (entries, sizes, names, compression
// ratio) before a byte is written, and each entry is read only up to the
// size it declares.
package container

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// Limits bound a container's extraction.
type Limits struct {
	MaxBytes   int64 // all entries together (INGEST_MAX_FILE_BYTES)
	MaxEntries int   // INGEST_MAX_ZIP_ENTRIES
	MaxRatio   int64 // content over container size, beyond 16 MiB (INGEST_MAX_ZIP_RATIO)
}

// Entry is a file unpacked from a container, with its size and sha256.
type Entry struct {
	Name   string
	Size   int64
	SHA256 string
}

// Open opens a container and checks it from its central directory,
// before a byte is written: the number of entries, their total size and
// its ratio to the container's, safe and distinct names. It returns the
// open container and the total of its content.
func Open(src string, lim Limits) (zr *zip.ReadCloser, total int64, err error) {
	if zr, err = zip.OpenReader(src); err != nil {
		return nil, 0, err
	}
	if total, err = inspect(zr, src, lim); err != nil {
		zr.Close()
		return nil, 0, err
	}
	return zr, total, nil
}

func inspect(zr *zip.ReadCloser, src string, lim Limits) (int64, error) {
	if len(zr.File) > lim.MaxEntries {
		return 0, fmt.Errorf("more than %d entries (INGEST_MAX_ZIP_ENTRIES)", lim.MaxEntries)
	}
	var total uint64
	seen := make(map[string]bool, len(zr.File))
	for _, zf := range zr.File {
		if zf.FileInfo().IsDir() {
			continue
		}
		if err := manifest.SafeName(zf.Name); err != nil {
			return 0, err
		}
		key := strings.ToLower(path.Clean(zf.Name))
		if seen[key] {
			return 0, fmt.Errorf("%.200q is in the container twice", zf.Name)
		}
		seen[key] = true
		if total += zf.UncompressedSize64; total > uint64(lim.MaxBytes) {
			return 0, fmt.Errorf("content larger than %d bytes (INGEST_MAX_FILE_BYTES)", lim.MaxBytes)
		}
	}
	if st, err := os.Stat(src); err == nil && total > 16<<20 && int64(total) > lim.MaxRatio*max(st.Size(), 1) {
		return 0, fmt.Errorf("content of %d bytes is more than %d times the container's %d (INGEST_MAX_ZIP_RATIO)", total, lim.MaxRatio, st.Size())
	}
	return int64(total), nil
}

// Extract writes a container that Open passed into dst, each entry
// read up to its declared size (archive/zip fails an entry longer than it
// declares).
func Extract(zr *zip.ReadCloser, dst string) ([]Entry, error) {
	var files []Entry
	for _, zf := range zr.File {
		if zf.FileInfo().IsDir() {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dst, filepath.FromSlash(zf.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			rc.Close()
			return nil, err
		}
		out, err := os.Create(p)
		if err != nil {
			rc.Close()
			return nil, err
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(rc, int64(zf.UncompressedSize64)+1))
		rc.Close()
		out.Close()
		if err == nil && n != int64(zf.UncompressedSize64) {
			err = fmt.Errorf("%d bytes, the container declares %d", n, zf.UncompressedSize64)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", zf.Name, err)
		}
		files = append(files, Entry{Name: zf.Name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	if len(files) == 0 {
		return nil, errors.New("the container holds no file")
	}
	return files, nil
}
