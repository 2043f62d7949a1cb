package cdxindex_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
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

// BenchmarkMergeVsSortM merges 8 sorted CDX files of 250,000 lines each
// with Merge and with `LC_ALL=C sort -m` (to /dev/null), in turns, in one
// run: merge/sort-m is Merge's time over sort's.
//
//	go test -run '^$' -bench MergeVsSortM -benchtime 5x ./services/aggregator/cdxindex/
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
	var merge, sortM time.Duration
	for range b.N {
		t0 := time.Now()
		cmd := testenv.Peer(b, "sort", append([]string{"-m"}, paths...)...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		sortM += time.Since(t0)
		t0 = time.Now()
		var rs []io.Reader
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			rs = append(rs, f)
		}
		if _, err := cdxindex.Merge(io.Discard, rs...); err != nil {
			b.Fatal(err)
		}
		merge += time.Since(t0)
	}
	b.ReportMetric(merge.Seconds()/sortM.Seconds(), "merge/sort-m")
	b.ReportMetric(float64(size)*float64(b.N)/merge.Seconds()/1e6, "merge-MB/s")
	b.ReportMetric(float64(size)*float64(b.N)/sortM.Seconds()/1e6, "sort-m-MB/s")
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
				testenv.ResetPeakRSS()
				t0 = time.Now()
				lines, err := cdxindex.MergeBounded(dst, n, cdxindex.DefaultFanIn, dir, func(i int) (io.ReadCloser, error) { return os.Open(paths[i]) })
				if err != nil {
					b.Fatal(err)
				}
				fold := time.Since(t0)
				dst.Close()
				peak := testenv.PeakRSS(b)

				// The aggregator's build: the same fold into a ZipNum
				// cluster (gzip blocks of 3,000 lines and a summary).
				zdir := filepath.Join(dir, "cluster")
				os.MkdirAll(zdir, 0o755)
				testenv.ResetPeakRSS()
				t0 = time.Now()
				z, err := cdxindex.NewZipNumWriter(zdir, "fold", 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cdxindex.MergeBounded(z, n, cdxindex.DefaultFanIn, dir, func(i int) (io.ReadCloser, error) { return os.Open(paths[i]) }); err != nil {
					b.Fatal(err)
				}
				if err := z.Close(); err != nil {
					b.Fatal(err)
				}
				cluster := time.Since(t0)
				b.ReportMetric(float64(lines)/fold.Seconds(), "lines/s")
				b.ReportMetric(sortm.Seconds()/fold.Seconds(), "x-sort-m")
				b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
				b.ReportMetric(sortm.Seconds()/cluster.Seconds(), "zipnum-x-sort-m")
				b.ReportMetric(float64(testenv.PeakRSS(b))/(1<<20), "zipnum-peak-MiB")
			}
		})
	}
}

// BenchmarkClusterLookup measures exact-key lookups (the first 10
// captures of a URL) on a ZipNum cluster of 10^6, 10^7 and 10^8 lines
// (ARCHIVIST_BENCH_MAX_LINES lowers the top), the summary in memory and
// the blocks read from a local disk: p50, p99 and the most blocks one
// query read. The cluster's memory (the summary) is reported too.
//
//	go test -run '^$' -bench ClusterLookup -benchtime 1x -timeout 60m ./services/aggregator/cdxindex/
func BenchmarkClusterLookup(b *testing.B) {
	for n := 1_000_000; n <= benchTop(); n *= 10 {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			dir := b.TempDir()
			z := buildCluster(b, dir, n)
			c, summary := openMeasured(b, func(name string) (io.ReadCloser, error) { return os.Open(filepath.Join(dir, name)) },
				func(l string) (io.ReaderAt, error) { return os.Open(filepath.Join(dir, l)) })
			lookups(b, c, n, max(b.N, 2000))
			b.ReportMetric(float64(z.Bytes())/1e6, "cluster-MB")
			b.ReportMetric(summary, "summary-MiB")
		})
	}
}

// BenchmarkLookupOnS3 is BenchmarkClusterLookup with the cluster on S3
// (MinIO, a real S3 server, on this machine): the summary read once and
// kept in memory, each block one ranged GET (blob.ReaderAt, as the
// aggregator reads them). Its last size, 10^9 lines, is
// a summary of 10^9 lines' blocks over sparse parts (the blocks the
// lookups read are written, the others named but not stored): the
// summary's search and memory at that size, which no disk here holds the
// lines of.
//
//	go test -run '^$' -bench LookupOnS3 -benchtime 1x -timeout 60m ./services/aggregator/cdxindex/
func BenchmarkLookupOnS3(b *testing.B) {
	ctx := context.Background()
	store, _ := testenv.MinIOBucket(b, "")
	open := func(prefix string) (func(string) (io.ReadCloser, error), func(string) (io.ReaderAt, error)) {
		get := func(name string) (io.ReadCloser, error) {
			rc, _, err := store.Get(ctx, prefix+name)
			return rc, err
		}
		return get, func(l string) (io.ReaderAt, error) { return blob.ReaderAt(ctx, store, prefix+l) }
	}
	upload := func(b *testing.B, dir, prefix string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range ents {
			f, err := os.Open(filepath.Join(dir, e.Name()))
			if err != nil {
				b.Fatal(err)
			}
			_, err = store.Put(ctx, prefix+e.Name(), f, nil)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			os.Remove(filepath.Join(dir, e.Name())) // the disk holds one size at a time
		}
	}
	for n := 1_000_000; n <= benchTop(); n *= 10 {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			dir := b.TempDir()
			z := buildCluster(b, dir, n)
			prefix := fmt.Sprintf("lines-%d/", n)
			upload(b, dir, prefix)
			get, at := open(prefix)
			c, summary := openMeasured(b, get, at)
			lookups(b, c, n, max(b.N, 2000))
			b.ReportMetric(float64(z.Bytes())/1e6, "cluster-MB")
			b.ReportMetric(summary, "summary-MiB")
		})
	}
	const n, per = 1_000_000_000, 3000
	b.Run(testenv.CurveName(n), func(b *testing.B) { // sparse: the summary whole, the parts not
		dir := b.TempDir()
		stored := sparseCluster(b, dir, n, per, 500)
		upload(b, dir, "sparse/")
		get, at := open("sparse/")
		c, summary := openMeasured(b, get, at)
		r := rand.New(rand.NewPCG(2, 2))
		lat := make([]time.Duration, 0, 2000)
		most := 0
		for range max(b.N, 2000) {
			// A line within a stored block, not its first or last: the lookup
			// starts and ends in that block.
			blk := stored[r.IntN(len(stored))]
			i := blk*per + 1 + r.IntN(per-2)
			q := cdxindex.Query{Key: lineKey(i)}
			t0 := time.Now()
			cur := c.Cursor(q)
			_, ok := cur.Next()
			for ok {
				_, ok = cur.Next()
			}
			lat = append(lat, time.Since(t0))
			if cur.Err() != nil {
				b.Fatalf("%+v: %v", q, cur.Err())
			}
			most = max(most, cur.BlocksRead)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(most), "max-blocks/query")
		b.ReportMetric(summary, "summary-MiB")
	})
}

// benchTop is the largest cluster the lookup benchmarks build: 10^8
// lines, or ARCHIVIST_BENCH_MAX_LINES.
func benchTop() int {
	top := 100_000_000
	if v := os.Getenv("ARCHIVIST_BENCH_MAX_LINES"); v != "" {
		fmt.Sscan(v, &top)
	}
	return top
}

// buildCluster writes a ZipNum cluster "big" of n lines (appendLine's)
// into dir.
func buildCluster(b *testing.B, dir string, n int) *cdxindex.ZipNumWriter {
	z, err := cdxindex.NewZipNumWriter(dir, "big", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	line := make([]byte, 0, 256)
	for i := range n {
		line = appendLine(line[:0], i, 0)
		z.Write(line)
	}
	if err := z.Close(); err != nil {
		b.Fatal(err)
	}
	return z
}

// sparseCluster writes into dir the summary "big.idx" of a cluster of n
// lines in blocks of per lines, and a part holding only `keep` of its
// blocks, chosen at random (the others named at offset 0, never read); it
// returns the stored blocks' numbers.
func sparseCluster(b *testing.B, dir string, n, per, keep int) []int {
	blocks := n / per
	r := rand.New(rand.NewPCG(3, 3))
	stored := map[int]bool{}
	for len(stored) < keep {
		stored[r.IntN(blocks)] = true
	}
	part, err := os.Create(filepath.Join(dir, "big-00000.cdx.gz"))
	if err != nil {
		b.Fatal(err)
	}
	idx, err := os.Create(filepath.Join(dir, "big.idx"))
	if err != nil {
		b.Fatal(err)
	}
	iw := bufio.NewWriterSize(idx, 1<<20)
	var off int64
	gz := gzip.NewWriter(io.Discard)
	var buf bytes.Buffer
	line := make([]byte, 0, 256)
	for blk := range blocks {
		f := bytes.SplitN(appendLine(nil, blk*per, 0), []byte(" "), 3)
		var length int64
		start := off
		if stored[blk] {
			buf.Reset()
			gz.Reset(&buf)
			for i := blk * per; i < (blk+1)*per; i++ {
				line = appendLine(line[:0], i, 0)
				gz.Write(line)
			}
			gz.Close()
			if _, err := part.Write(buf.Bytes()); err != nil {
				b.Fatal(err)
			}
			length = int64(buf.Len())
			off += length
		} else {
			start, length = 0, 1
		}
		fmt.Fprintf(iw, "%s %s\tbig-00000\t%d\t%d\t%d\n", f[0], f[1], start, length, blk+1)
	}
	if err := iw.Flush(); err != nil {
		b.Fatal(err)
	}
	idx.Close()
	part.Close()
	if err := os.WriteFile(filepath.Join(dir, "big.loc"), []byte("big-00000\tbig-00000.cdx.gz\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	out := make([]int, 0, keep)
	for blk := range stored {
		out = append(out, blk)
	}
	slices.Sort(out)
	return out
}

// openMeasured opens the cluster "big" (its summary and location file read
// with get, its parts with at) and returns it with the memory its summary
// takes, in MiB.
func openMeasured(b *testing.B, get func(string) (io.ReadCloser, error), at func(string) (io.ReaderAt, error)) (*cdxindex.Cluster, float64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	idx, err := get("big.idx")
	if err != nil {
		b.Fatal(err)
	}
	loc, err := get("big.loc")
	if err != nil {
		b.Fatal(err)
	}
	c, err := cdxindex.OpenCluster(idx, loc, at)
	idx.Close()
	loc.Close()
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return c, float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc)) / (1 << 20)
}

// lookups runs k exact-key lookups of random lines of the n in c (the
// first 10 captures of a URL) and reports their p50, p99 and the most
// blocks one read.
func lookups(b *testing.B, c *cdxindex.Cluster, n, k int) {
	r := rand.New(rand.NewPCG(1, 1))
	lat := make([]time.Duration, 0, k)
	most := 0
	b.ResetTimer()
	for range k {
		q := cdxindex.Query{Key: lineKey(r.IntN(n))}
		t0 := time.Now()
		cur := c.Cursor(q)
		got := 0
		for got < 10 {
			if _, ok := cur.Next(); !ok {
				break
			}
			got++
		}
		lat = append(lat, time.Since(t0))
		if cur.Err() != nil || got == 0 {
			b.Fatalf("%+v: %d lines, %v", q, got, cur.Err())
		}
		most = max(most, cur.BlocksRead)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(most), "max-blocks/query")
}

// lineKey is the URL key of appendLine's line i.
func lineKey(i int) string { return fmt.Sprintf("com,site%07d)/page/%04d", i/100, i%100*10) }

// appendLine appends line i of writeSorted's sequence (salt 0), newline
// ended, without fmt (10^8 of them are written).
func appendLine(b []byte, i, salt int) []byte {
	pad := func(b []byte, v, w int) []byte {
		s := strconv.Itoa(v)
		for range w - len(s) {
			b = append(b, '0')
		}
		return append(b, s...)
	}
	b = append(b, "com,site"...)
	b = pad(b, i/100, 7)
	b = append(b, ")/page/"...)
	b = pad(b, i%100*10+salt, 4)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(20260101000000+i%1000), 10)
	b = append(b, " http://site"...)
	b = strconv.AppendInt(b, int64(i/100), 10)
	b = append(b, ".example/page/"...)
	b = strconv.AppendInt(b, int64(i%100), 10)
	b = append(b, " text/html 200 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA - - 1043 "...)
	b = strconv.AppendInt(b, int64(i*1000), 10)
	b = append(b, " f"...)
	b = strconv.AppendInt(b, int64(salt), 10)
	return append(b, ".warc.gz\n"...)
}

// BenchmarkCurveFold is the aggregator's fold as a cost curve: 10^3, 10^4
// and 10^5 outputs of 100 lines each folded into one ZipNum cluster, the
// build's work (scripts/curves plots it).
func BenchmarkCurveFold(b *testing.B) {
	for _, n := range testenv.CurveSizes(100_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			dir := b.TempDir()
			paths := make([]string, n)
			line := make([]byte, 0, 256)
			for i := range paths {
				paths[i] = filepath.Join(dir, fmt.Sprintf("out-%06d.cdx", i))
				f, err := os.Create(paths[i])
				if err != nil {
					b.Fatal(err)
				}
				w := bufio.NewWriterSize(f, 32<<10)
				for j := range 100 {
					// Output i holds every n-th URL: outputs interleave, as
					// crawls of the same sites do.
					line = appendLine(line[:0], j*n+i, 0)
					w.Write(line)
				}
				w.Flush()
				f.Close()
			}
			zdir := filepath.Join(dir, "cluster")
			os.MkdirAll(zdir, 0o755)
			for range b.N {
				runtime.GC()
				testenv.ResetPeakRSS()
				t0 := time.Now()
				z, err := cdxindex.NewZipNumWriter(zdir, "fold", 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				lines, err := cdxindex.MergeBounded(z, n, cdxindex.DefaultFanIn, dir, func(i int) (io.ReadCloser, error) { return os.Open(paths[i]) })
				if err == nil {
					err = z.Close()
				}
				if err != nil || lines != int64(100*n) {
					b.Fatalf("%d lines: %v", lines, err)
				}
				testenv.ReportCurve(b, n, time.Since(t0))
			}
		})
	}
}
