package blob_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
)

// BenchmarkLocalPutObject puts objects of 4 small files as ingest does
// (objects/<ark>/v1/producer/<file> and 3 files under system/, the 4 at
// once), from 8 goroutines, without fsync: the cost of a put's file system
// operations. One op is one object.
//
//	go test -run '^$' -bench LocalPutObject ./pkg/blob/
func BenchmarkLocalPutObject(b *testing.B) {
	s, err := blob.NewLocal(b.TempDir(), blob.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			var wg sync.WaitGroup
			for _, p := range []string{"producer/file.txt", "system/mrt-erc.txt", "system/mrt-dc.xml", "system/mrt-manifest.checkm"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprintf("objects/ark_99999_fk4%d/v1/%s", i, p)
					if _, err := s.Put(context.Background(), key, strings.NewReader("a small file\n"), nil); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
	})
}

// BenchmarkLocalProbeAVersion asks the local store whether a version of
// one object holds anything (blob.ListAfter of "objects/<ark>/v<N>/",
// limit 1: what ingest asks before it gives a version number, and the
// minter before it gives an ARK), beside 10^3 to 10^5 other objects. Its
// cost must not grow with them: the walk starts in the version's own
// directory.
//
//	go test -run '^$' -bench LocalProbeAVersion ./pkg/blob/
func BenchmarkLocalProbeAVersion(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			s, err := blob.NewLocal(dir, blob.WithoutSync())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.Put(ctx, "objects/ark:99999%2Fmine/v1/producer/a.txt", strings.NewReader("mine"), nil); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if err := os.MkdirAll(filepath.Join(dir, "objects", fmt.Sprintf("ark:99999%%2Fother%07d", i), "v1"), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				found, err := blob.ListAfter(ctx, s, "objects/ark:99999%2Fmine/v2/", "", 1)
				if err != nil || len(found) != 0 {
					b.Fatalf("%v %v", found, err)
				}
				if found, err = blob.ListAfter(ctx, s, "objects/ark:99999%2Fmine/v1/", "", 1); err != nil || len(found) != 1 {
					b.Fatalf("%v %v", found, err)
				}
			}
		})
	}
}
