package ingest_test

import (
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
)

// BenchmarkSmallJobsEndToEnd submits a batch manifest of 1,000 small files
// (one job each) and times it from submission to the batch completed:
// every job estimated, downloaded, processed (ARK, ERC, DC, manifest),
// stored (4 blobs), recorded (inventory, 4 events) and notified. The
// curator, NATS and PostgreSQL (fsync off, as in every test) share this
// machine's 2 cores. The local blob store runs with its fsync per object
// (as deployed on a disk) and without (like the test PostgreSQL).
//
//	go test -run XXX -bench SmallJobs -benchtime 1x -count 3 ./services/curator/ingest/
func BenchmarkSmallJobsEndToEnd(b *testing.B) {
	const n = 1000
	for _, sync := range []bool{true, false} {
		name := "blob-fsync"
		if !sync {
			name = "blob-nosync"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				var opts []blob.LocalOption
				if !sync {
					opts = append(opts, blob.WithoutSync())
				}
				bs, err := blob.NewLocal(b.TempDir(), opts...)
				if err != nil {
					b.Fatal(err)
				}
				o := newOrigin(b)
				r := newRigWith(b, bs, map[string]string{"INGEST_CONCURRENCY": "16", "DATABASE_MAX_CONNS": "20"})
				murl, _ := o.manifest("bench", n)
				b.StartTimer()
				start := time.Now()
				id := r.submit(ingest.Submission{Submitter: "bench", Profile: "bench", PayloadURL: murl, Type: "batch-manifest", CallbackURL: r.cbURL})
				r.waitState(ingest.Batch, id, ingest.Completed, 10*time.Minute)
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "jobs/s")
			}
		})
	}
}
