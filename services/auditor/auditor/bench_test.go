package auditor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
	"github.com/archivist/archivist/services/auditor/workman"
)

// BenchmarkTasks100k measures bit-integrity tasks per second through the
// whole path: 100,000 small objects (1 KiB) in a local blob store, their
// content index and audit log rows, 100,000 tasks on the high queue, and the
// worker manager with 16 workers (AUDITOR_WORKERS=16: small objects' checks
// wait on round trips, which more workers overlap) running full checks (stat, read, sha256,
// index and log lookups, bit log insert, ack) until every object has its bit
// log row. docs/PERFORMANCE.md has figures.
func BenchmarkTasks100k(b *testing.B) {
	for range b.N {
		elapsed := runTasks(b, 100_000)
		b.ReportMetric(100_000/elapsed.Seconds(), "tasks/s")
		b.ReportMetric(elapsed.Seconds(), "s/100k")
	}
}

// BenchmarkCurveTasks is the task rate as a cost curve: 10^3, 10^4 and
// 10^5 objects checked (scripts/curves plots it).
func BenchmarkCurveTasks(b *testing.B) {
	for _, n := range testenv.CurveSizes(100_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			for range b.N {
				elapsed := runTasks(b, n)
				testenv.ReportCurve(b, n, elapsed)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "tasks/s")
			}
		})
	}
}

// runTasks checks n objects through the worker manager and returns how
// long it took (the setup untimed, the peak memory reset before).
func runTasks(b *testing.B, n int) time.Duration {
	b.StopTimer()
	ctx := context.Background()
	bs, err := blob.NewLocal(b.TempDir(), blob.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	db := testenv.DB(b, migrations.Schema)
	bb := testenv.Bus(b, "auditor")
	body := strings.Repeat("x", 1024)
	keys := make([]string, n)
	sums := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("objects/%03d/%06d", i%1000, i)
		info, err := bs.Put(ctx, keys[i], strings.NewReader(body+keys[i]), nil)
		if err != nil {
			b.Fatal(err)
		}
		sums[i] = info.Checksum.Value
	}
	if _, err := db.Exec(ctx, `INSERT INTO auditor.content_index (object, checksum, size) SELECT k, s, 1040 FROM unnest($1::text[], $2::text[]) AS t(k, s)`, keys, sums); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO auditor.audit_log (object, action, checksum, size) SELECT k, 'add', s, 1040 FROM unnest($1::text[], $2::text[]) AS t(k, s)`, keys, sums); err != nil {
		b.Fatal(err)
	}
	for start := 0; start < n; start += 5000 {
		var out []bus.Outgoing
		for _, k := range keys[start:min(start+5000, n)] {
			env, _ := events.New("bench", &events.AuditTask{Object: k, Reason: "on-demand"})
			out = append(out, bus.Outgoing{Subject: events.SubjectAuditTaskHigh, Envelope: env})
		}
		if err := bb.PublishBatch(ctx, out); err != nil {
			b.Fatal(err)
		}
	}
	a := auditor.New(bb, db, bs, nil, auditor.Config{Cycle: time.Hour, RetryDelay: time.Minute}, testenv.Logger(b))
	cfg := workman.Config{Workers: 16, Batch: 10, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, FailureDelay: time.Second}
	rctx, cancel := context.WithCancel(ctx)
	m, err := workman.New(rctx, bb, events.AuditorHigh, events.AuditorLow, a.Task, cfg, workman.Hooks{}, a.Failures(), testenv.Logger(b))
	if err != nil {
		b.Fatal(err)
	}
	testenv.ResetPeakRSS()
	b.StartTimer()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	for {
		var c int
		db.QueryRow(ctx, `SELECT count(*) FROM auditor.bit_log`).Scan(&c)
		if c >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	var failed int
	db.QueryRow(ctx, `SELECT count(*) FROM auditor.bit_log WHERE NOT success`).Scan(&failed)
	if failed != 0 {
		b.Errorf("%d checks failed", failed)
	}
	return elapsed
}

// BenchmarkCurveSchedule is the auditor's scheduling as a cost curve: a
// cycle's worth of due checks, 10^3 to 10^6 objects (the schedule made
// with generate_series), queued by QueueDue (500 a transaction, one
// publish batch each) (scripts/curves plots it).
func BenchmarkCurveSchedule(b *testing.B) {
	ctx := context.Background()
	for _, n := range testenv.CurveSizes(1_000_000) {
		b.Run(testenv.CurveName(n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db := testenv.DB(b, migrations.Schema)
				bb := testenv.Bus(b, "auditor")
				if _, err := db.Exec(ctx, `INSERT INTO auditor.schedule (object, next_due)
					SELECT 'objects/' || g, timestamptz '2026-01-01' + g * interval '1 second' FROM generate_series(1, $1) g`, n); err != nil {
					b.Fatal(err)
				}
				if _, err := db.Exec(ctx, `VACUUM ANALYZE auditor.schedule`); err != nil {
					b.Fatal(err)
				}
				a := auditor.New(bb, db, nil, nil, auditor.Config{Cycle: 90 * 24 * time.Hour}, testenv.Logger(b))
				testenv.ResetPeakRSS()
				b.StartTimer()
				t0 := time.Now()
				queued, err := a.QueueDue(ctx, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
				if err != nil || queued != n {
					b.Fatalf("queued %d of %d: %v", queued, n, err)
				}
				testenv.ReportCurve(b, n, time.Since(t0))
			}
		})
	}
}
