package auditor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"
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

// slowStore hands out readers that trickle: each read of at most 256 KiB
// takes 100 ms (an object too large to read within a handler timeout, in
// small).
type slowStore struct{ blob.Store }

func (s slowStore) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	rc, info, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, info, err
	}
	return trickle{rc}, info, nil
}

type trickle struct{ io.ReadCloser }

func (t trickle) Read(p []byte) (int, error) {
	time.Sleep(100 * time.Millisecond)
	return t.ReadCloser.Read(p[:min(len(p), 256<<10)])
}

// TestCheckReadsAsLongAsTheObjectNeeds: a check that read for longer than
// the handler timeout (15 minutes; here its reads outlast five ack waits
// and five stall timeouts) could never finish: its context ended, its task
// was redelivered, for ever. The task is now kept while bytes flow, and
// the check ends in one delivery.
func TestCheckReadsAsLongAsTheObjectNeeds(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("archive bytes "), 300_000) // 4 MiB: 17 reads, 1.7 s
	if _, err := local.Put(ctx, "objects/large", bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(data)
	for _, q := range []string{`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)`,
		`INSERT INTO auditor.audit_log (object, action, checksum, size) VALUES ($1, 'add', $2, $3)`} {
		if _, err := db.Exec(ctx, q, "objects/large", hex.EncodeToString(d[:]), len(data)); err != nil {
			t.Fatal(err)
		}
	}
	b := testenv.Bus(t, "auditor")
	cfg := workman.Config{Workers: 1, Batch: 10, BackoffMin: 20 * time.Millisecond, BackoffMax: 160 * time.Millisecond,
		FailureDelay: 50 * time.Millisecond, StallTimeout: 300 * time.Millisecond}
	a := auditor.New(b, db, slowStore{local}, nil, auditor.Config{Workman: cfg, Cycle: time.Hour, RetryDelay: time.Second}, testenv.Logger(t))
	high := events.AuditorHigh
	high.Config.AckWait = 300 * time.Millisecond
	var mu sync.Mutex
	var deliveries []uint64
	handler := func(ctx context.Context, m *bus.Message[events.AuditTask]) error {
		mu.Lock()
		deliveries = append(deliveries, m.Metadata.NumDelivered)
		mu.Unlock()
		return a.Task(ctx, m)
	}
	delivered := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), deliveries...)
	}
	mctx, cancel := context.WithCancel(ctx)
	m, err := workman.New(mctx, b, high, events.AuditorLow, handler, cfg, workman.Hooks{}, a.Failures(), testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(mctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()
	if _, err := a.CheckNow(ctx, "objects/large", "", false); err != nil {
		t.Fatal(err)
	}
	var row int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := db.QueryRow(ctx, `SELECT row_no FROM auditor.bit_log WHERE object = 'objects/large' ORDER BY id DESC LIMIT 1`).Scan(&row)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no check of the slow object recorded after 30 s; deliveries %v", delivered())
		}
	}
	time.Sleep(500 * time.Millisecond) // a redelivery would show
	stop()
	if got := delivered(); row != 1 || len(got) != 1 {
		t.Errorf("row %d after deliveries %v; want row 1 (all went as planned) in one delivery", row, got)
	}
}
