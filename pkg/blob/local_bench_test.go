package blob_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
)

// BenchmarkLocalPutSmall puts small objects from 16 goroutines at once,
// each object in a directory of its own as ingest lays them out
// (objects/<ark>/v1/<path>), without fsync: the cost of the file system
// operations of a put.
//
//	go test -run XXX -bench LocalPutSmall ./pkg/blob/
func BenchmarkLocalPutSmall(b *testing.B) {
	s, err := blob.NewLocal(b.TempDir(), blob.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			key := fmt.Sprintf("objects/ark_99999_fk4%d/v1/producer/file.txt", i)
			if _, err := s.Put(context.Background(), key, strings.NewReader("a small file\n"), map[string]string{"ark": "x"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
