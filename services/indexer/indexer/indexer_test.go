package indexer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/indexer/cdx"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// warcFile is a gzipped WARC, one member per record, of n responses.
func warcFile(host string, n int) []byte {
	var out bytes.Buffer
	for i := range n {
		body := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>%s %d</p>", host, i)
		rec := fmt.Sprintf("WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://%s/page/%d\r\nWARC-Date: 2026-01-02T03:04:%02dZ\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			host, i, i%60, len(body), body)
		w := gzip.NewWriter(&out)
		w.Write([]byte(rec))
		w.Close()
	}
	return out.Bytes()
}

func expectedCDX(t *testing.T, data []byte, name string) string {
	var lines []string
	cdx.Index(bytes.NewReader(data), name, func(e cdx.Entry) error { lines = append(lines, e.String()); return nil })
	sort.Strings(lines)
	return cdx.Header + "\n" + strings.Join(lines, "\n") + "\n"
}

// TestIndexerEndToEnd: archive files dropped into the repository, and one
// announced by an event, are indexed into sorted CDX, recorded and
// announced; a corrupt file is indexed up to its fault, retried alone and
// parked after three failures; an operator's reset hands it out again.
func TestIndexerEndToEnd(t *testing.T) {
	ctx := context.Background()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"warcs/a.warc.gz": warcFile("a.example", 5),
		"warcs/b.warc.gz": warcFile("b.example", 3),
		"other/c.warc.gz": warcFile("c.example", 2), // outside the listing: learnt from an event
	}
	broken := warcFile("d.example", 3)
	files["warcs/broken.warc.gz"] = broken[:len(broken)-30]
	for name, data := range files {
		if _, err := bs.Put(ctx, name, bytes.NewReader(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	bs.Put(ctx, "warcs/readme.txt", strings.NewReader("not an archive"), nil)
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	testenv.StartServiceIn(t, indexer.Definition(), sh, map[string]string{
		"INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_SCAN_INTERVAL": "200ms", "INDEXER_DISPATCH_INTERVAL": "50ms", "INDEXER_MAX_FAILURES": "3", "INDEXER_RETRY_BASE": "20ms",
	})
	b := testenv.BusAt(t, sh.NATSURL, "ingest")
	if _, _, err := b.PublishEvent(ctx, &events.ObjectRecorded{Object: "other/c.warc.gz", SHA256: strings.Repeat("0", 64), Size: int64(len(files["other/c.warc.gz"]))}); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := registry.New(db, 3)
	wait := func(name, status string) registry.File {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			f, err := reg.Get(ctx, name)
			if err == nil && f.Status == status {
				return f
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v %v, want status %s", name, f, err, status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, name := range []string{"warcs/a.warc.gz", "warcs/b.warc.gz", "other/c.warc.gz"} {
		f := wait(name, "indexed")
		rc, _, err := bs.Get(ctx, f.Output)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		// Lines name the file by its key (events.CDXFileName).
		if want := expectedCDX(t, files[name], events.CDXFileName(name)); string(got) != want {
			t.Errorf("%s: output\n%s\nwant\n%s", name, got, want)
		}
	}
	parked := wait("warcs/broken.warc.gz", "parked")
	if parked.Failures != 3 || !strings.Contains(parked.LastError, "corrupt gzip member") || parked.Lines != 2 {
		t.Errorf("parked file %+v: want 3 failures, the reason, and the 2 lines before the fault", parked)
	}
	if _, err := reg.Get(ctx, "warcs/readme.txt"); err == nil {
		t.Error("a text file was registered as an archive")
	}
	// Every file's current output was announced (an attempt's output that a
	// later attempt replaced before its announcement need not be).
	st, err := b.JetStream().Stream(ctx, events.StreamIndexReady)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		unannounced, err := reg.Unannounced(ctx, 10)
		info, _ := st.Info(ctx)
		if err == nil && len(unannounced) == 0 && info.State.Msgs >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d index.cdx.ready announced, %d outputs unannounced (%v)", info.State.Msgs, len(unannounced), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The operator resets the parked file: it is tried again.
	ws := reg.Work(func() {})
	if _, err := ws.Act(ctx, work.Retry, work.Filter{Pipeline: "index", Kind: "file", ID: "warcs/broken.warc.gz"}, 1, "ops"); err != nil {
		t.Fatal(err)
	}
	if f, _ := reg.Get(ctx, "warcs/broken.warc.gz"); f.Failures != 0 && f.Status != "queued" && f.Status != "indexing" {
		t.Errorf("after reset: %+v", f)
	}
	wait("warcs/broken.warc.gz", "parked")
}

// TestStoreOutageParksNothing: the blob store's root is gone (an unmounted
// volume) while five files wait to be indexed, with a budget of one
// failure: nothing is failed or parked, the indexer pauses, and once the
// root is back every file is indexed on its first attempt.
func TestStoreOutageParksNothing(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "blobs")
	bs, err := blob.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for i := range 5 {
		name := fmt.Sprintf("warcs/f%d.warc.gz", i)
		if _, err := bs.Put(ctx, name, bytes.NewReader(warcFile(fmt.Sprintf("h%d.example", i), 2)), nil); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	testenv.StartServiceIn(t, indexer.Definition(), sh, map[string]string{
		"INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_SCAN_INTERVAL": "200ms", "INDEXER_DISPATCH_INTERVAL": "50ms",
		"INDEXER_MAX_FAILURES": "1", "INDEXER_RETRY_BASE": "10ms", "INDEXER_RETRY_BUDGET": "1ms",
	})
	b := testenv.BusAt(t, sh.NATSURL, "ingest")
	for _, name := range names {
		if _, _, err := b.PublishEvent(ctx, &events.ObjectRecorded{Object: name, SHA256: strings.Repeat("0", 64), Size: 10}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := store.Open(ctx, store.Config{URL: sh.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := registry.New(db, 1)
	// Every file known and waiting for the store, for 3 s.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := reg.Status(ctx)
		if err == nil && st.ByStatus["new"]+st.ByStatus["indexing"]+st.ByStatus["queued"] == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("files not registered with the store down: %+v %v", st, err)
		}
	}
	time.Sleep(3 * time.Second)
	st, err := reg.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus["failed"]+st.ByStatus["parked"] != 0 {
		t.Fatalf("the store's outage failed or parked files: %+v", st)
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			f, err := reg.Get(ctx, name)
			if err == nil && f.Status == "indexed" {
				if f.Failures != 0 || f.Lines != 2 {
					t.Errorf("%s: %+v, want indexed with no failure", name, f)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the store came back: %+v %v", name, f, err)
			}
		}
	}
}
