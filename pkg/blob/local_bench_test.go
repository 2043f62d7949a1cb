package blob_test

import (
	"context"
	"fmt"
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
