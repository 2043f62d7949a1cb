package indexer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

// TestScanIsIncrementalAndResumes: the repository scan lists a page of
// keys a tick, after the last key it registered (kept in PostgreSQL, so a
// new leader resumes there), and starts over once a listing ends; a file
// added behind the cursor is found by the next cycle. Every replica used
// to list the whole store every minute.
func TestScanIsIncrementalAndResumes(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string) {
		t.Helper()
		if _, err := bs.Put(ctx, key, strings.NewReader("WARC/1.0\r\n"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 25 {
		put(fmt.Sprintf("warcs/f%02d.warc.gz", i*2))
	}
	put("elsewhere/x.warc.gz")
	newIndexer := func() *indexer.Indexer {
		return indexer.New(nil, registry.New(db, 3), bs, indexer.Config{RepositoryPrefix: "warcs/"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	ix := newIndexer()
	for i, want := range []indexer.ScanResult{{10, 10, false}, {10, 10, false}} {
		if r, err := ix.ScanPage(ctx, 10); err != nil || r != want {
			t.Fatalf("page %d: %+v %v, want %+v", i+1, r, err, want)
		}
	}
	// A file behind the cursor, and a new leader (the cursor is kept).
	put("warcs/f01.warc.gz")
	ix = newIndexer()
	if r, err := ix.ScanPage(ctx, 10); err != nil || r != (indexer.ScanResult{5, 5, true}) {
		t.Fatalf("the last page: %+v %v, want 5 listed, 5 found, the cycle done", r, err)
	}
	if r, err := ix.ScanPage(ctx, 10); err != nil || r != (indexer.ScanResult{10, 1, false}) {
		t.Errorf("the next cycle's first page: %+v %v, want 10 listed and the file added behind the cursor found", r, err)
	}
	st, err := registry.New(db, 3).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range st.ByStatus {
		total += n
	}
	if total != 26 {
		t.Errorf("%d files registered, want the 26 under warcs/ (%v)", total, st.ByStatus)
	}
}

// BenchmarkCurveScan is the repository scan as a cost curve: 10^3, 10^4
// and 10^5 archive files in a local store (a directory of its own per
// thousand, as crawls write them), one whole scan cycle of pages of
// 10,000 keys, every file registered (scripts/curves plots it).
func BenchmarkCurveScan(b *testing.B) {
	ctx := context.Background()
	for _, n := range testenv.CurveSizes(100_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			bs, err := blob.NewLocal(b.TempDir(), blob.WithoutSync())
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if _, err := bs.Put(ctx, fmt.Sprintf("warcs/%03d/f%07d.warc.gz", i/1000, i), strings.NewReader("WARC/1.0\r\n"), nil); err != nil {
					b.Fatal(err)
				}
			}
			for range b.N {
				db := testenv.DB(b, migrations.Schema)
				ix := indexer.New(nil, registry.New(db, 3), bs, indexer.Config{RepositoryPrefix: "warcs/"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
				testenv.ResetPeakRSS()
				t0 := time.Now()
				found := 0
				for {
					r, err := ix.ScanPage(ctx, 10_000)
					if err != nil {
						b.Fatal(err)
					}
					found += r.Found
					if r.CycleDone {
						break
					}
				}
				testenv.ReportCurve(b, n, time.Since(t0))
				if found != n {
					b.Fatalf("%d files found, want %d", found, n)
				}
			}
		})
	}
}
