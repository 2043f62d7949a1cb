package ingest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDownloadVsCurl downloads 4 files of 256 MB over loopback, in
// one run: curl -o FILE (the peer), then the downloading daemon's fetch,
// which also computes sha256 and checks the manifest's md5 as it writes,
// and fetch with one hash (a manifest with sha256 digests, or none).
// docs/PERFORMANCE.md has figures.
//
//	go test -run XXX -bench DownloadVsCurl -benchtime 2x ./services/curator/ingest/
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
	g := &Ingester{cfg: Config{MaxFileBytes: 1 << 40, Retries: 1, AllowPrivate: true}, log: slog.New(slog.DiscardHandler), client: &http.Client{}}
	const files = 4
	b.Run("curl", func(b *testing.B) {
		b.SetBytes(files * size)
		for range b.N {
			for i := range files {
				out := filepath.Join(dir, fmt.Sprintf("curl-%d", i))
				if msg, err := exec.Command("curl", "-sS", "-o", out, fmt.Sprintf("%s/f%d", srv.URL, i)).CombinedOutput(); err != nil {
					b.Fatalf("curl: %v %s", err, msg)
				}
				os.Remove(out)
			}
		}
	})
	fetch := func(b *testing.B, alg, digest string) {
		b.SetBytes(files * size)
		for range b.N {
			for i := range files {
				out := filepath.Join(dir, fmt.Sprintf("fetch-%d", i))
				f := File{URL: fmt.Sprintf("%s/f%d", srv.URL, i), Name: "f", DigestAlg: alg, Digest: digest}
				if err := g.fetch(context.Background(), &f, out); err != nil {
					b.Fatal(err)
				}
				os.Remove(out)
			}
		}
	}
	// As the daemon runs: the manifest's md5 checked and the sha256 the
	// inventory keeps computed.
	b.Run("fetch-md5+sha256", func(b *testing.B) { fetch(b, "md5", hex.EncodeToString(sum[:])) })
	// A manifest with sha256 digests (or none): one hash.
	b.Run("fetch-sha256", func(b *testing.B) { fetch(b, "", "") })
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
