package fetch

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// BenchmarkDownloadVsCurl downloads 4 files of 256 MB over loopback, in
// one run, one after another and all 4 at once: curl -o FILE (the peer),
// then the downloading daemon's fetch, which also computes sha256 and
// checks the manifest's md5 as it writes, and fetch with one hash (a
// manifest with sha256 digests, or none).
// docs/PERFORMANCE.md has figures.
//
//	go test -run '^$' -bench DownloadVsCurl -benchtime 2x ./services/curator/ingest/
func BenchmarkDownloadVsCurl(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Fatal("curl not found (apt-get install curl): it is the peer this benchmark compares with")
	}
	const size = 256 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			data[i+k] = byte(v >> (8 * k))
		}
	}
	sum := md5.Sum(data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "f", time.Time{}, newReaderAt(data))
	}))
	defer srv.Close()
	dir := b.TempDir()
	g, err := New(Config{MaxFileBytes: 1 << 40, Retries: 1, AllowPrivate: true})
	if err != nil {
		b.Fatal(err)
	}
	const files = 4
	// each runs get(i) for every file, one after another or all at once
	// (as the downloading daemon does for a job's files).
	each := func(b *testing.B, parallel bool, get func(i int) error) {
		b.SetBytes(files * size)
		for range b.N {
			errs := make(chan error, files)
			for i := range files {
				if parallel {
					go func() { errs <- get(i) }()
				} else {
					errs <- get(i)
				}
			}
			for range files {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	curl := func(i int) error {
		out := filepath.Join(dir, fmt.Sprintf("curl-%d", i))
		defer os.Remove(out)
		if msg, err := exec.Command("curl", "-sS", "-o", out, fmt.Sprintf("%s/f%d", srv.URL, i)).CombinedOutput(); err != nil {
			return fmt.Errorf("curl: %v %s", err, msg)
		}
		return nil
	}
	fetch := func(alg, digest string) func(i int) error {
		return func(i int) error {
			out := filepath.Join(dir, fmt.Sprintf("fetch-%d", i))
			defer os.Remove(out)
			f := ingest.File{URL: fmt.Sprintf("%s/f%d", srv.URL, i), Name: "f", DigestAlg: alg, Digest: digest}
			return g.Download(context.Background(), &f, out)
		}
	}
	// The ceiling of any download that checks an md5: hashing the bytes
	// already in memory, on one core (one file's md5 cannot be split).
	b.Run("md5-in-memory", func(b *testing.B) {
		b.SetBytes(files * size)
		for range b.N {
			for range files {
				if md5.Sum(data) != sum {
					b.Fatal("md5 changed")
				}
			}
		}
	})
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run(mode.name+"/curl", func(b *testing.B) { each(b, mode.parallel, curl) })
		// As the daemon runs for a manifest with md5 digests: the md5
		// checked and the sha256 the inventory keeps computed.
		b.Run(mode.name+"/fetch-md5+sha256", func(b *testing.B) { each(b, mode.parallel, fetch("md5", hex.EncodeToString(sum[:]))) })
		// A manifest with sha256 digests (or none): one hash.
		b.Run(mode.name+"/fetch-sha256", func(b *testing.B) { each(b, mode.parallel, fetch("", "")) })
	}
}

type readerAt struct {
	data []byte
	off  int64
}

func newReaderAt(d []byte) *readerAt { return &readerAt{data: d} }

func (r *readerAt) Read(p []byte) (int, error) {
	if r.off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += int64(n)
	return n, nil
}

func (r *readerAt) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		r.off = off
	case io.SeekCurrent:
		r.off += off
	case io.SeekEnd:
		r.off = int64(len(r.data)) + off
	}
	return r.off, nil
}
