package cdx_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/indexer/cdx"
	"github.com/archivist/archivist/services/indexer/warc"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
)

// BenchmarkIndexVsGunzip compares, in one run on the same file, indexing a
// gzipped WARC (read, decompress, parse, SURT, digest where missing, CDX
// lines) with a plain `gunzip -c` of it: the limit an indexer can reach.
// The file is pywb's iana.warc.gz (171 records, many revisits) repeated 64
// times (~50 MB). docs/PERFORMANCE.md has figures.
func BenchmarkIndexVsGunzip(b *testing.B) {
	src := filepath.Join(warcs(b, "indexing pywb's iana.warc.gz against gunzip"), "pywb", "sample_archive", "warcs", "iana.warc.gz")
	one, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat(one, 64)
	path := filepath.Join(b.TempDir(), "big.warc.gz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	if _, err := exec.LookPath("gunzip"); err != nil {
		b.Fatal("gunzip not found: it is the peer this benchmark compares with")
	}
	b.Run("gunzip", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			cmd := testenv.Peer(b, "gunzip", "-c", path)
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("index", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		records := 0
		for range b.N {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			n, err := cdx.Index(f, "big.warc.gz", func(e cdx.Entry) error { _ = e.String(); return nil })
			f.Close()
			if err != nil || n == 0 {
				b.Fatalf("%d entries: %v", n, err)
			}
			records += n
		}
		b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkSortVsSortC sorts the lines of one unsorted 1,000,000-line CDX
// file (an indexer output's worth of a very large WARC), in one run:
// `LC_ALL=C sort` of the file to /dev/null, and reading the file's lines and
// WriteSorted, as the indexer and `archivist cdx --sort` do.
func BenchmarkSortVsSortC(b *testing.B) {
	var buf bytes.Buffer
	rng := rand.New(rand.NewPCG(7, 7))
	for range 1_000_000 {
		i := rng.IntN(1 << 30)
		fmt.Fprintf(&buf, "com,site%07d)/page/%04d %d http://site%d.example/page/%d text/html 200 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA - - 1043 %d f.warc.gz\n",
			i%100000, i%1000, 20260101000000+i%1000, i%100000, i%1000, i)
	}
	path := filepath.Join(b.TempDir(), "unsorted.cdx")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	size := int64(buf.Len())
	b.Run("sort-C", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			cmd := testenv.Peer(b, "sort", path)
			cmd.Env = append(os.Environ(), "LC_ALL=C")
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteSorted", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if err := cdx.WriteSorted(io.Discard, lines); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIndexVsIgzip indexes 50 MB crawl-like gzipped WARCs beside
// `igzip -dc` and `gunzip -c` of the same file, in one run: sequentially
// (Index) and on every core (IndexAt), as `archivist cdx` and the indexer
// do. Ratios are wall time over igzip's. Two crawls: large records (seven
// responses in ten precompressed payloads, as a crawl's images and video;
// warctest.Crawl) and web pages (small records, most of them text, as
// wget's crawl of a site; warctest.Pages); and a real crawl when
// ARCHIVIST_BENCH_CRAWL names one (docs/PERFORMANCE.md makes one with
// wget). Built with -tags libdeflate (CGO_ENABLED=1), as the images are,
// members are inflated by libdeflate; without, by klauspost/compress.
//
//	CGO_ENABLED=1 go test -tags libdeflate -run '^$' -bench IndexVsIgzip -benchtime 5x ./services/indexer/cdx/
func BenchmarkIndexVsIgzip(b *testing.B) {
	b.Logf("inflate: %s", warc.Inflate)
	for _, c := range []struct {
		name  string
		write func(io.Writer, int64, uint64) (int, error)
	}{{"crawl=large-records", warctest.Crawl}, {"crawl=web-pages", warctest.Pages}} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "crawl.warc.gz")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.write(f, 50<<20, 7); err != nil {
				b.Fatal(err)
			}
			f.Close()
			indexVsIgzip(b, path)
		})
	}
	if path := os.Getenv("ARCHIVIST_BENCH_CRAWL"); path != "" {
		b.Run("crawl=real", func(b *testing.B) { indexVsIgzip(b, path) })
	} else {
		b.Log("no ARCHIVIST_BENCH_CRAWL: the real crawl is left out")
	}
}

// indexVsIgzip is BenchmarkIndexVsIgzip on the crawl at path.
func indexVsIgzip(b *testing.B, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	peers := map[string][]string{"igzip": {"igzip", "-dc"}, "gunzip": {"gunzip", "-c"}}
	for _, p := range peers {
		if _, err := exec.LookPath(p[0]); err != nil {
			b.Fatalf("%s not found (Debian: apt-get install isal gzip): it is a peer this benchmark compares with", p[0])
		}
	}
	run := func(name string) time.Duration {
		t0 := time.Now()
		switch name {
		case "igzip", "gunzip":
			cmd := testenv.Peer(b, peers[name][0], append(peers[name][1:], path)...)
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		default:
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var n int
			if name == "index" {
				n, err = cdx.Index(bufio.NewReaderSize(f, 1<<20), "crawl.warc.gz", func(e cdx.Entry) error { _ = e.String(); return nil })
			} else {
				n, err = cdx.IndexAt(f, fi.Size(), "crawl.warc.gz", runtime.GOMAXPROCS(0), func(e cdx.Entry) error { _ = e.String(); return nil })
			}
			if err != nil || n == 0 {
				b.Fatalf("%s: %d entries: %v", name, n, err)
			}
		}
		return time.Since(t0)
	}
	names := []string{"igzip", "gunzip", "index", "index-parallel"}
	total := map[string]time.Duration{}
	for range b.N {
		for _, n := range names {
			total[n] += run(n)
		}
	}
	for _, n := range names[1:] {
		b.ReportMetric(total[n].Seconds()/total["igzip"].Seconds(), n+"/igzip")
	}
	b.ReportMetric(float64(fi.Size())*float64(b.N)/total["index-parallel"].Seconds()/1e6, "parallel-MB/s")
}
