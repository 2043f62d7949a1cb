package cdxindex_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// writeSorted writes n sorted CDX lines, keys spread over hosts and paths.
func writeSorted(b *testing.B, path string, n, salt int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, cdxindex.Header)
	for i := range n {
		fmt.Fprintf(w, "com,site%07d)/page/%04d %d http://site%d.example/page/%d text/html 200 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA - - 1043 %d f%d.warc.gz\n",
			i/100, i%100*10+salt, 20260101000000+i%1000, i/100, i%100, i*1000, salt)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// BenchmarkMergeVsSortM merges 8 sorted CDX files of 250,000 lines each,
// in one run: `LC_ALL=C sort -m` of the files, and Merge.
func BenchmarkMergeVsSortM(b *testing.B) {
	dir := b.TempDir()
	var paths []string
	var size int64
	for i := range 8 {
		p := filepath.Join(dir, fmt.Sprintf("%d.cdx", i))
		writeSorted(b, p, 250_000, i)
		fi, _ := os.Stat(p)
		size += fi.Size()
		paths = append(paths, p)
	}
	b.Run("sort-m", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			cmd := exec.Command("sort", append([]string{"-m"}, paths...)...)
			cmd.Env = append(os.Environ(), "LC_ALL=C")
			cmd.Stdout = io.Discard
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("merge", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			var rs []io.Reader
			for _, p := range paths {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				rs = append(rs, bufio.NewReaderSize(f, 1<<20))
			}
			if _, err := cdxindex.Merge(io.Discard, rs...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLookup10M measures exact-key lookups (the first 10 captures of a
// URL) on a sorted 10,000,000-line index file: p50 and p99.
func BenchmarkLookup10M(b *testing.B) {
	path := filepath.Join(b.TempDir(), "index.cdx")
	writeSorted(b, path, 10_000_000, 0)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	idx := cdxindex.Open(f, fi.Size())
	r := rand.New(rand.NewPCG(1, 1))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		i := r.IntN(10_000_000)
		q := cdxindex.Query{Key: fmt.Sprintf("com,site%07d)/page/%04d", i/100, i%100*10), Limit: 10}
		t0 := time.Now()
		lines, err := idx.Find(q)
		lat = append(lat, time.Since(t0))
		if err != nil || len(lines) == 0 {
			b.Fatalf("%+v: %d lines, %v", q, len(lines), err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(fi.Size())/1e6, "index-MB")
}

// BenchmarkFoldOutputs folds N small sorted outputs (100 lines each) into
// one, as the aggregator's build does, at N = 1,000 and 10,000: the peak
// resident memory of the fold (reset before it, read after: VmHWM) and its
// time beside `LC_ALL=C sort -m` over the same files, in one run.
//
//	go test -run '^$' -bench FoldOutputs -benchtime 1x ./services/aggregator/cdxindex/
func BenchmarkFoldOutputs(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			paths := make([]string, n)
			for i := range paths {
				paths[i] = filepath.Join(dir, fmt.Sprintf("out-%05d.cdx", i))
				writeSorted(b, paths[i], 100, i)
			}
			for range b.N {
				out, err := os.Create(filepath.Join(dir, "sortm.cdx"))
				if err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command("sort", append([]string{"-m", "-u", "-T", dir}, paths...)...)
				cmd.Env = append(os.Environ(), "LC_ALL=C")
				cmd.Stdout = out
				t0 := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				sortm := time.Since(t0)
				out.Close()

				dst, err := os.Create(filepath.Join(dir, "merged.cdx"))
				if err != nil {
					b.Fatal(err)
				}
				_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM
				t0 = time.Now()
				lines, err := cdxindex.MergeBounded(dst, n, cdxindex.DefaultFanIn, dir, func(i int) (io.ReadCloser, error) { return os.Open(paths[i]) })
				if err != nil {
					b.Fatal(err)
				}
				fold := time.Since(t0)
				dst.Close()
				b.ReportMetric(float64(lines)/fold.Seconds(), "lines/s")
				b.ReportMetric(sortm.Seconds()/fold.Seconds(), "x-sort-m")
				b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-MiB")
			}
		})
	}
}

// peakRSS is the process's peak resident set (VmHWM) in bytes.
func peakRSS(b *testing.B) int64 {
	text, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
