package aggregator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
	"github.com/archivist/archivist/services/aggregator/migrations"
)

// TestLateAnnouncementDoesNotReplaceANewerOutput: a file re-indexed (its
// second output announced) and then the first announcement redelivered
// late: the newer output stays; a replay of the newer one neither changes
// it nor makes it merge again.
func TestLateAnnouncementDoesNotReplaceANewerOutput(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	a := New(db, nil, Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	announce := func(output string, lines int64, sent time.Time) {
		t.Helper()
		ev := &events.IndexCDXReady{File: "a.warc.gz", Output: output, Lines: lines, Complete: true}
		if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: output, SentAt: sent}, Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	current := func() (output string, received time.Time) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT output, received_at FROM aggregator.outputs WHERE file = 'a.warc.gz'`).Scan(&output, &received); err != nil {
			t.Fatal(err)
		}
		return output, received
	}
	announce("cdx/a.warc.gz/1.cdx", 5, at)
	announce("cdx/a.warc.gz/2.cdx", 6, at.Add(time.Minute))
	_, received := current()
	announce("cdx/a.warc.gz/1.cdx", 5, at) // the first, redelivered late
	if out, _ := current(); out != "cdx/a.warc.gz/2.cdx" {
		t.Errorf("output %s after a late announcement, want the newer cdx/a.warc.gz/2.cdx", out)
	}
	announce("cdx/a.warc.gz/2.cdx", 6, at.Add(time.Minute)) // a replay
	announce("cdx/a.warc.gz/2.cdx", 6, at.Add(time.Hour))   // the same output announced again
	if out, r := current(); out != "cdx/a.warc.gz/2.cdx" || !r.Equal(received) {
		t.Errorf("output %s received %s after replays, want it unchanged (received %s)", out, r, received)
	}
	if n := testutil.ToFloat64(a.skipped); n != 2 {
		t.Errorf("%v announcements counted as skipped, want 2 (the late one and the replay)", n)
	}
}

// TestMergedClustersAreDeletedAfterAGrace: a level full of clusters
// merges into one of the next level; the clusters merged are retired with
// the swap and their files deleted once AGGREGATOR_RETIRE_AFTER has
// passed; the merged cluster's are kept and answer.
func TestMergedClustersAreDeletedAfterAGrace(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	a.cfg.LevelFactor = 2
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var merged []string
	for i, file := range []string{"a.warc.gz", "b.warc.gz"} {
		announce(t, a, bs, file, at.Add(time.Duration(i)*time.Minute), "com,example)/"+file+" 20260101000000 http://example.com/"+file+" text/html 200 AAAA - - 10 0 "+file)
		if i == 0 {
			if err := a.MergeNew(ctx); err != nil {
				t.Fatal(err)
			}
			merged = append(merged, a.files("L0-1", 1)...)
		}
	}
	merged = append(merged, a.files("L0-2", 1)...)
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	gens, err := a.Generations(ctx)
	if err != nil || len(gens) != 1 || gens[0].Level != "L1" || gens[0].Lines != 2 || gens[0].Sources != 2 {
		t.Fatalf("clusters %+v %v: want one L1 of 2 lines from 2 outputs", gens, err)
	}
	kept := a.files("L1-1-2", 1)
	exists := func(k string) bool {
		_, err := bs.Stat(ctx, k)
		return err == nil
	}
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range merged {
		if !exists(k) {
			t.Fatalf("the merged cluster's %s was deleted within its grace", k)
		}
	}
	a.cfg.RetireAfter = 0
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range merged {
		if exists(k) {
			t.Errorf("after the grace %s still exists", k)
		}
	}
	for _, k := range kept {
		if !exists(k) {
			t.Errorf("the live cluster's %s was deleted", k)
		}
	}
	if got, err := a.Lookup(ctx, cdxindex.Query{Key: "com,example)/", Prefix: true}, nil); err != nil || len(got) != 2 {
		t.Errorf("lookup after the deletion: %q %v, want both lines", got, err)
	}
}

// TestSupersededOutputsAreDeletedAfterAGrace: a re-indexed file's earlier
// output, and the output of an announcement that arrives after a newer
// one, were kept in the blob store for ever. Each is retired when it stops
// being the file's and deleted after AGGREGATOR_RETIRE_AFTER; the file's
// current output stays, and a build after the deletion has its lines.
func TestSupersededOutputsAreDeletedAfterAGrace(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	announce := func(attempt int, sent time.Time) string {
		t.Helper()
		out := fmt.Sprintf("cdx/a.warc.gz/%d.cdx", attempt)
		line := fmt.Sprintf("com,example)/a 20260101000000 http://example.com/a text/html 200 AAAA - - 10 %d a.warc.gz\n", attempt)
		if _, err := bs.Put(ctx, out, strings.NewReader(line), nil); err != nil {
			t.Fatal(err)
		}
		ev := &events.IndexCDXReady{File: "a.warc.gz", Output: out, Lines: 1, Complete: true}
		if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: out, SentAt: sent}, Event: ev}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := announce(1, at)
	second := announce(2, at.Add(time.Minute))
	late := announce(3, at) // written, but announced as older than the second
	exists := func(k string) bool {
		_, err := bs.Stat(ctx, k)
		return err == nil
	}
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(first) || !exists(late) {
		t.Fatal("superseded outputs deleted within their grace")
	}
	a.cfg.RetireAfter = 0
	if err := a.DeleteRetired(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(first) || exists(late) || !exists(second) {
		t.Errorf("after the grace: first %v, late %v (want both deleted), current %v (want kept)", exists(first), exists(late), exists(second))
	}
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	if gens, err := a.Generations(ctx); err != nil || len(gens) != 1 || gens[0].Lines != 1 {
		t.Errorf("a build after the deletion: %+v %v, want the current output's line", gens, err)
	}
}

// storeAggregator is an aggregator on a test database and a local blob
// store, clusters retired after an hour.
func storeAggregator(t *testing.T) (*Aggregator, blob.Store) {
	t.Helper()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return New(testenv.DB(t, migrations.Schema), bs, Config{LevelFactor: 8, Prefix: "index/", RetireAfter: time.Hour, FanIn: 64, MaxQueryLines: 1000},
		slog.New(slog.NewTextHandler(io.Discard, nil))), bs
}

// announce writes an output of file holding lines (sorted) and announces
// it as sent at sent; it returns the output's key.
func announce(t *testing.T, a *Aggregator, bs blob.Store, file string, sent time.Time, lines ...string) string {
	t.Helper()
	ctx := context.Background()
	slices.Sort(lines)
	out := fmt.Sprintf("cdx/%s/%d.cdx", file, sent.UnixNano())
	body := strings.Join(lines, "\n") + "\n"
	if len(lines) == 0 {
		body = ""
	}
	if _, err := bs.Put(ctx, out, strings.NewReader(body), nil); err != nil {
		t.Fatal(err)
	}
	ev := &events.IndexCDXReady{File: file, Output: out, Lines: int64(len(lines)), Complete: true}
	if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: out, SentAt: sent}, Event: ev}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReindexedAndWithdrawnFilesLeaveEveryQuery: a file indexed again
// answers with its new lines only, before and after its new output is
// built; a withdrawn file answers nothing from the moment it is withdrawn;
// when their clusters merge the old lines are left out and the masks go.
// Before masks, a build of new outputs could not remove lines an earlier
// cluster held.
func TestReindexedAndWithdrawnFilesLeaveEveryQuery(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	a.cfg.LevelFactor = 2
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	line := func(file, ts string) string {
		return "com,example)/ " + ts + " http://example.com/ text/html 200 AAAA - - 10 0 " + file
	}
	query := func() []string {
		t.Helper()
		got, err := a.Lookup(ctx, cdxindex.Query{Key: "com,example)/"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	announce(t, a, bs, "warcs/a.warc.gz", at, line("warcs/a.warc.gz", "20260101000000"))
	announce(t, a, bs, "warcs/b.warc.gz", at, line("warcs/b.warc.gz", "20260102000000"))
	announce(t, a, bs, "warcs/c.warc.gz", at, line("warcs/c.warc.gz", "20260103000000"))
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := query(); len(got) != 3 {
		t.Fatalf("before: %q", got)
	}
	// a re-indexed (its capture now read as another time), b withdrawn.
	announce(t, a, bs, "warcs/a.warc.gz", at.Add(time.Hour), line("warcs/a.warc.gz", "20260104000000"))
	if _, err := a.Withdraw(ctx, "warcs/b.warc.gz", "takedown request"); err != nil {
		t.Fatal(err)
	}
	want := []string{line("warcs/c.warc.gz", "20260103000000")}
	if got := query(); !slices.Equal(got, want) {
		t.Errorf("at once (a's new output not built yet):\n got %q\nwant %q", got, want)
	}
	if err := a.MergeNew(ctx); err != nil { // a's new output built, two L0 merged into L1
		t.Fatal(err)
	}
	want = []string{line("warcs/c.warc.gz", "20260103000000"), line("warcs/a.warc.gz", "20260104000000")}
	if got := query(); !slices.Equal(got, want) {
		t.Errorf("after the merge:\n got %q\nwant %q", got, want)
	}
	var masks int
	if err := a.db.QueryRow(ctx, `SELECT count(*) FROM aggregator.masks`).Scan(&masks); err != nil || masks != 0 {
		t.Errorf("%d masks left after their cluster merged (%v)", masks, err)
	}
	if gens, _ := a.Generations(ctx); len(gens) != 1 || gens[0].Lines != 2 {
		t.Errorf("clusters %+v: want one of the 2 live lines", gens)
	}
	// Announced again after its withdrawal, b stays out (a takedown
	// sticks) until an operator reinstates it.
	announce(t, a, bs, "warcs/b.warc.gz", at.Add(2*time.Hour), line("warcs/b.warc.gz", "20260102000000"))
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := query(); len(got) != 2 {
		t.Errorf("b announced again after its withdrawal: %q, want it refused", got)
	}
	if had, err := a.Reinstate(ctx, "warcs/b.warc.gz"); err != nil || !had {
		t.Fatalf("reinstate: %t %v", had, err)
	}
	announce(t, a, bs, "warcs/b.warc.gz", at.Add(3*time.Hour), line("warcs/b.warc.gz", "20260102000000"))
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := query(); len(got) != 3 {
		t.Errorf("b reinstated and indexed again: %q", got)
	}
}

// TestDeletedFilesLeaveTheIndex: an archive file deleted from the archive
// (archive.object.deleted, an object withdrawn) answers no query from the
// moment the aggregator takes the event; a deleted key the index never
// had is nothing to do.
func TestDeletedFilesLeaveTheIndex(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	line := func(file, ts string) string {
		return "com,example)/ " + ts + " http://example.com/ text/html 200 AAAA - - 10 0 " + file
	}
	announce(t, a, bs, "objects/ark99999fk4x/v1/producer/a.warc.gz", at, line("objects/ark99999fk4x/v1/producer/a.warc.gz", "20260101000000"))
	announce(t, a, bs, "warcs/b.warc.gz", at, line("warcs/b.warc.gz", "20260102000000"))
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	deleted := func(key string) error {
		return a.Deleted(ctx, &bus.Message[events.ObjectDeleted]{Envelope: events.Envelope{ID: "deleted:" + key, SentAt: time.Now()},
			Event: &events.ObjectDeleted{Object: key}})
	}
	if err := deleted("objects/ark99999fk4x/v1/producer/a.warc.gz"); err != nil {
		t.Fatal(err)
	}
	if err := deleted("objects/ark99999fk4x/v1/producer/cover.jpg"); err != nil {
		t.Errorf("a key the index never had: %v", err)
	}
	got, err := a.Lookup(ctx, cdxindex.Query{Key: "com,example)/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasSuffix(got[0], "b.warc.gz") {
		t.Errorf("after the delete: %q", got)
	}
}

// TestTakedownBeforeTheAnnouncementSticks: a deletion (an object withdrawn
// within its indexing window) that reaches the aggregator before the
// file's announcement leaves a tombstone: the announcement that follows,
// and any replay of it, is refused and counted, and no query answers the
// withdrawn captures. (The deletion of a file the index did not hold yet
// was dropped, and the announcement then put the captures in.)
func TestTakedownBeforeTheAnnouncementSticks(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const key = "objects/ark:99999%2Ffk4x/v1/producer/crawl.warc.gz"
	line := "com,example)/ 20260101000000 http://example.com/ text/html 200 AAAA - - 10 0 " + events.CDXFileName(key)
	if err := a.Deleted(ctx, &bus.Message[events.ObjectDeleted]{Envelope: events.Envelope{ID: "deleted:" + key, SentAt: at},
		Event: &events.ObjectDeleted{Object: key}}); err != nil {
		t.Fatal(err)
	}
	announce(t, a, bs, key, at.Add(time.Minute), line)
	announce(t, a, bs, key, at.Add(2*time.Minute), line) // a replay, later
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := a.Lookup(ctx, cdxindex.Query{Key: "com,example)/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("a takedown before the announcement: %q answered", got)
	}
	if n := testutil.ToFloat64(a.refused); n != 2 {
		t.Errorf("%v announcements refused, want 2", n)
	}
}

// duringBuild is a blob store that runs hook once, the first time an
// output is read (a build under way).
type duringBuild struct {
	blob.Store
	once sync.Once
	hook func()
}

func (d *duringBuild) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	if strings.HasPrefix(key, "cdx/") {
		d.once.Do(d.hook)
	}
	return d.Store.Get(ctx, key)
}

// TestWithdrawnDuringABuildIsMasked: a file withdrawn while the build
// reading its output runs has its lines, named as they are (its key),
// masked in that build: no query answers them. (The build masked them by
// the key's last part, which lines no longer carry.)
func TestWithdrawnDuringABuildIsMasked(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	const key = "objects/ark:99999%2Ffk4y/v1/producer/crawl.warc.gz"
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	announce(t, a, bs, key, at, "com,example)/ 20260101000000 http://example.com/ text/html 200 AAAA - - 10 0 "+events.CDXFileName(key))
	a.blob = &duringBuild{Store: bs, hook: func() {
		if _, err := a.Withdraw(ctx, key, "a takedown during the build"); err != nil {
			t.Error(err)
		}
	}}
	if err := a.MergeNew(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := a.Lookup(ctx, cdxindex.Query{Key: "com,example)/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("withdrawn during its build, answered: %q", got)
	}
}

// TestAnnouncementRacingAWithdrawal: an announcement and a withdrawal of
// one file at the same moment, a hundred times: whichever commits first,
// the file ends withdrawn, its output never live. (Each saw nothing of the
// other's uncommitted row, and both committed: the withdrawn file's lines
// were answered; the model found it.)
func TestAnnouncementRacingAWithdrawal(t *testing.T) {
	ctx := context.Background()
	a, bs := storeAggregator(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		file := fmt.Sprintf("objects/x/v%d/producer/crawl.warc.gz", i+1)
		out := fmt.Sprintf("cdx/%d.cdx", i)
		if _, err := bs.Put(ctx, out, strings.NewReader("com,example)/ 20260101000000 http://example.com/ text/html 200 AAAA - - 10 0 "+events.CDXFileName(file)+"\n"), nil); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			ev := &events.IndexCDXReady{File: file, Output: out, Lines: 1, Complete: true}
			if err := a.Ready(ctx, &bus.Message[events.IndexCDXReady]{Envelope: events.Envelope{ID: out, SentAt: at}, Event: ev}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := a.Withdraw(ctx, file, "a takedown"); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		var live int
		if err := a.db.QueryRow(ctx, `SELECT count(*) FROM aggregator.outputs WHERE file = $1 AND NOT withdrawn`, file).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if live != 0 {
			t.Fatalf("round %d: the withdrawn %s has a live output", i, file)
		}
	}
}
