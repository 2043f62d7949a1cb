package ingest_test

import (
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// BenchmarkSmallJobsEndToEnd submits a batch manifest of 1,000 small files
// (one job each) and times it from submission to the batch completed:
// every job estimated, downloaded, processed (ARK, ERC, DC, manifest),
// stored (4 blobs), recorded (inventory, 4 events) and notified. The
// curator, NATS and PostgreSQL share this machine's 2 cores.
//
//	go test -run XXX -bench SmallJobs -benchtime 1x -count 3 ./services/curator/ingest/
func BenchmarkSmallJobsEndToEnd(b *testing.B) {
	const n = 1000
	for range b.N {
		b.StopTimer()
		o := newOrigin(b)
		r := newRig(b, map[string]string{"INGEST_CONCURRENCY": "16", "DATABASE_MAX_CONNS": "20"})
		murl, _ := o.manifest("bench", n)
		b.StartTimer()
		start := time.Now()
		id := r.submit(ingest.Submission{Submitter: "bench", Profile: "bench", PayloadURL: murl, Type: "batch-manifest", CallbackURL: r.cbURL})
		r.waitState(ingest.Batch, id, ingest.Completed, 10*time.Minute)
		el := time.Since(start)
		b.ReportMetric(float64(n)/el.Seconds(), "jobs/s")
	}
}
