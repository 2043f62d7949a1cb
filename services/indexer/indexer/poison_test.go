package indexer_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

// slowStore serves one key chunk bytes every delay: a file whose indexing
// takes as long as a test needs.
type slowStore struct {
	blob.Store
	key   string
	chunk int
	delay time.Duration
}

func (s slowStore) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	rc, info, err := s.Store.Get(ctx, key)
	if err != nil || key != s.key {
		return rc, info, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&trickle{rc, s.chunk, s.delay}, rc}, info, nil
}

type trickle struct {
	r     io.Reader
	chunk int
	delay time.Duration
}

func (t *trickle) Read(p []byte) (int, error) {
	time.Sleep(t.delay)
	return t.r.Read(p[:min(len(p), t.chunk)])
}

// A file that takes longer than INDEXER_TASK_TIMEOUT fails that attempt,
// each attempt counts, and after INDEXER_MAX_FAILURES it is parked with
// the reason, while other files are indexed.
func TestFileOutlastingTheDeadlineIsParked(t *testing.T) {
	ctx := context.Background()
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	local.Put(ctx, "warcs/slow.warc.gz", bytes.NewReader(warcFile("slow.example", 50)), nil)
	local.Put(ctx, "warcs/ok.warc.gz", bytes.NewReader(warcFile("ok.example", 2)), nil)
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: slowStore{local, "warcs/slow.warc.gz", 1, 50 * time.Millisecond}}
	testenv.StartServiceIn(t, indexer.Definition(), sh, map[string]string{
		"INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_DISPATCH_INTERVAL": "50ms", "INDEXER_MAX_FAILURES": "3", "INDEXER_RETRY_BASE": "20ms",
		"INDEXER_TASK_TIMEOUT": "300ms", "INDEXER_STALE_AFTER": "30s",
	})
	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := registry.New(db, 3)
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, _ := reg.Get(ctx, "warcs/slow.warc.gz")
		ok, _ := reg.Get(ctx, "warcs/ok.warc.gz")
		if f.Status == "parked" && ok.Status == "indexed" {
			if f.Failures != 3 || !strings.Contains(f.LastError, "INDEXER_TASK_TIMEOUT") {
				t.Errorf("parked %+v: want 3 failures and the deadline as the reason", f)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow file %+v, other file %+v after 30 s", f, ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An attempt that claimed its file and never finished (its indexer was
// killed, or hung past the handler's bound) counts as a failure when the
// file is handed out again; after MaxFailures the file is parked.
func TestAttemptThatNeverFinishesCounts(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, store.Config{URL: testenv.DBURL(t, migrations.Schema), MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := registry.New(db, 3, registry.WithRetry(0, 0, 0))
	if _, err := reg.Discover(ctx, "warcs/kills.warc.gz", 10); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		due, err := reg.TakeDue(ctx, 10, 50*time.Millisecond)
		if err != nil || len(due) != 1 {
			t.Fatalf("attempt %d: due %v, %v", attempt, due, err)
		}
		if ok, err := reg.Claim(ctx, due[0]); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		time.Sleep(100 * time.Millisecond) // the indexer dies holding it
	}
	if due, _ := reg.TakeDue(ctx, 10, 50*time.Millisecond); len(due) != 0 {
		t.Fatalf("handed out again: %v", due)
	}
	f, _ := reg.Get(ctx, "warcs/kills.warc.gz")
	if f.Status != "parked" || f.Failures != 3 || !strings.Contains(f.LastError, "did not finish") {
		t.Errorf("%+v: want parked after 3 unfinished attempts, with the reason", f)
	}
}
