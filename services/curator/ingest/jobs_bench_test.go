package ingest_test

import (
	"os"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
)

// BenchmarkSmallJobsEndToEnd submits a batch manifest of 1,000 small files
// (one job each) and times it from submission to the batch completed:
// every job estimated, downloaded, processed (ARK, ERC, DC, manifest),
// stored (4 blobs), recorded (inventory, 4 events) and notified. The
// curator, NATS and PostgreSQL (fsync off, as in every test) share this
// machine's 2 cores. The blob store and the working area are on the disk
// under the test's temporary directory, the blob store syncing each object
// (as deployed) and not; then both in memory (/dev/shm), which shows what
// the file system costs.
//
//	go test -run '^$' -bench SmallJobs -benchtime 1x -count 3 ./services/curator/ingest/
func BenchmarkSmallJobsEndToEnd(b *testing.B) {
	const n = 1000
	for _, c := range []struct {
		name string
		sync bool
		shm  bool
	}{{"disk-fsync", true, false}, {"disk-nosync", false, false}, {"tmpfs", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				root := b.TempDir()
				if c.shm {
					if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
						b.Skip("no /dev/shm here for the in-memory run")
					}
					var err error
					if root, err = os.MkdirTemp("/dev/shm", "archivist-bench-"); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { os.RemoveAll(root) })
				}
				dir, work := root+"/blob", root+"/work"
				var opts []blob.LocalOption
				if !c.sync {
					opts = append(opts, blob.WithoutSync())
				}
				bs, err := blob.NewLocal(dir, opts...)
				if err != nil {
					b.Fatal(err)
				}
				o := newOrigin(b)
				r := newRigWith(b, bs, map[string]string{"INGEST_CONCURRENCY": "16", "DATABASE_MAX_CONNS": "20", "INGEST_WORK_DIR": work})
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

// BenchmarkCurveBatch is ingest as a cost curve: one batch of 10^3, 10^4
// and 10^5 small jobs (a manifest of N files of 1 KiB, which the local
// origin makes as they are asked for: its files cost nothing) from
// submission to completed, the blob store on disk without a sync per
// object (scripts/curves plots it).
func BenchmarkCurveBatch(b *testing.B) {
	for _, n := range testenv.CurveSizes(100_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				root := b.TempDir()
				bs, err := blob.NewLocal(root+"/blob", blob.WithoutSync())
				if err != nil {
					b.Fatal(err)
				}
				o := newOrigin(b)
				r := newRigWith(b, bs, map[string]string{"INGEST_CONCURRENCY": "16", "DATABASE_MAX_CONNS": "20", "INGEST_WORK_DIR": root + "/work"})
				murl := o.generatedManifest("curve", n)
				testenv.ResetPeakRSS()
				b.StartTimer()
				start := time.Now()
				id := r.submit(ingest.Submission{Submitter: "bench", Profile: "bench", PayloadURL: murl, Type: "batch-manifest", CallbackURL: r.cbURL})
				r.waitState(ingest.Batch, id, ingest.Completed, time.Hour)
				testenv.ReportCurve(b, n, time.Since(start))
			}
		})
	}
}
