package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	aggmigrations "github.com/archivist/archivist/services/aggregator/migrations"
	"github.com/archivist/archivist/services/archivist/indexcmd"
	"github.com/archivist/archivist/services/indexer/indexer"
	indexermigrations "github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
)

// indexing runs an indexer finding WARC files under warcs/ of a local
// store, and an aggregator (with env, name and value pairs) indexing them,
// both quick; it returns the store and the aggregator's API.
func indexing(t *testing.T, env ...string) (*blob.Local, string) {
	t.Helper()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	natsURL := testenv.NATS(t)
	testenv.StartServiceIn(t, indexer.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, indexermigrations.Schema), Blob: bs},
		map[string]string{"INDEXER_HTTP_ADDR": "127.0.0.1:0", "INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_SCAN_INTERVAL": "100ms", "INDEXER_DISPATCH_INTERVAL": "50ms"})
	port := testenv.FreePort(t)
	aggEnv := map[string]string{"AGGREGATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "AGGREGATOR_MERGE_INTERVAL": "100ms"}
	for i := 0; i+1 < len(env); i += 2 {
		aggEnv[env[i]] = env[i+1]
	}
	testenv.StartServiceIn(t, aggregator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, aggmigrations.Schema), Blob: bs}, aggEnv)
	return bs, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// TestFilesDroppedAreAnsweredByTheCDXAPI: WARC files dropped into the
// repository are indexed, built into ZipNum clusters and answered by the
// CDX API (exact, host and domain matches, cdx and json output); a full
// level merges into the next.
func TestFilesDroppedAreAnsweredByTheCDXAPI(t *testing.T) {
	ctx := context.Background()
	bs, api := indexing(t, "AGGREGATOR_LEVEL_FACTOR", "2")
	get := func(q string) string {
		resp, err := http.Get(api + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", q, resp.StatusCode, b)
		}
		return string(b)
	}
	waitLines := func(q string, n int) string {
		deadline := time.Now().Add(30 * time.Second)
		for {
			out := get(q)
			if strings.Count(out, "\n") == n {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q, want %d lines", q, out, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	bs.Put(ctx, "warcs/one.warc.gz", bytes.NewReader(warctest.Gzipped("www.example.com", 5)), nil)
	waitLines("/cdx?url=http://example.com/p/3", 1)
	waitLines("/cdx?url=example.com/&matchType=host", 5)

	bs.Put(ctx, "warcs/two.warc.gz", bytes.NewReader(warctest.Gzipped("blog.example.com", 4)), nil)
	bs.Put(ctx, "warcs/three.warc.gz", bytes.NewReader(warctest.Gzipped("other.org", 4)), nil)
	waitLines("/cdx?url=example.com&matchType=domain", 9)
	out := waitLines("/cdx?url=other.org/p/&matchType=prefix&limit=2", 2)
	if !strings.HasPrefix(out, "org,other)/p/0 ") {
		t.Errorf("prefix query:\n%s", out)
	}
	js := get("/cdx?url=http://other.org/p/1&output=json")
	var obj map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(js)), &obj); err != nil || obj["urlkey"] != "org,other)/p/1" || obj["filename"] != "warcs/three.warc.gz" || obj["status"] != "200" {
		t.Errorf("json output %q: %v", js, err)
	}
	if got := get("/cdx?url=http://other.org/p/1&sort=closest&closest=2026&fl=timestamp,filename"); got != "20260302000000 warcs/three.warc.gz\n" {
		t.Errorf("closest with fl: %q", got)
	}
	// Three files in at least two builds: two level-0 clusters merged
	// into a level-1 one, 13 lines from 3 outputs in all.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var gens []aggregator.Generation
		json.Unmarshal([]byte(get("/v1/index/generations")), &gens)
		var lines, sources int64
		for _, g := range gens {
			lines, sources = lines+g.Lines, sources+g.Sources
		}
		if len(gens) > 0 && gens[0].Level == "L1" && lines == 13 && sources == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("clusters %+v: want a level-1 cluster, 13 lines from 3 outputs", gens)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitLines("/cdx?url=example.com&matchType=domain", 9)

	// The operator's view shows the clusters.
	gens, err := indexcmd.Generations(ctx, api)
	if err != nil {
		t.Fatal(err)
	}
	var view strings.Builder
	indexcmd.Print(&view, registry.Status{}, gens, nil, time.Now())
	if !regexp.MustCompile(`(?m)^L1-\d+-\d+\s+L1\s+\d+\s+1\s+\d+\s+[23]\s+\d+s ago$`).MatchString(view.String()) {
		t.Errorf("index status:\n%s", view.String())
	}
	if resp, _ := http.Get(api + "/cdx?url=x&matchType=bogus"); resp.StatusCode != 400 {
		t.Errorf("bad matchType: %d", resp.StatusCode)
	}
}

// restartRig is WARC files (stored, not compressed: cheap to make
// under the race detector) in a local repository, the indexer's
// and the aggregator's environment, and a way to count what the CDX API
// answers for them.
type restartRig struct {
	blobDir   string
	bs        blob.Store
	fileSize  int
	files     int
	want      int
	port      int
	ixShared  testenv.Shared
	aggShared testenv.Shared
	ixEnv     map[string]string
	aggEnv    map[string]string
}

func newRestartRig(t *testing.T, files, fileSize int) *restartRig {
	r := &restartRig{blobDir: t.TempDir()}
	bs, err := blob.NewLocal(r.blobDir)
	if err != nil {
		t.Fatal(err)
	}
	r.bs, r.fileSize = bs, fileSize
	for range files {
		r.add(t)
	}
	natsURL := testenv.NATS(t)
	r.ixShared = testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, indexermigrations.Schema), Blob: bs}
	r.aggShared = testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, aggmigrations.Schema), Blob: bs}
	r.port = testenv.FreePort(t)
	r.ixEnv = map[string]string{"INDEXER_HTTP_ADDR": "127.0.0.1:0", "INDEXER_REPOSITORY_PREFIX": "warcs/", "INDEXER_SCAN_INTERVAL": "100ms",
		"INDEXER_DISPATCH_INTERVAL": "50ms", "INDEXER_STALE_AFTER": "2s", "INDEXER_TASK_TIMEOUT": "1500ms", "INDEXER_CONCURRENCY": "1", "INDEXER_RETRY_BASE": "20ms"}
	r.aggEnv = map[string]string{"AGGREGATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", r.port), "AGGREGATOR_MERGE_INTERVAL": "100ms"}
	return r
}

// add stores one more file of the rig's size in the repository.
func (r *restartRig) add(t *testing.T) {
	t.Helper()
	data, last := bigWARC(fmt.Sprintf("h%d.example.com", r.files), r.fileSize, gzip.NoCompression)
	n, _ := strconv.Atoi(last[strings.LastIndex(last, "/")+1:])
	if _, err := r.bs.Put(context.Background(), fmt.Sprintf("warcs/f%d.warc.gz", r.files), bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	r.files++
	r.want += n + 1
}

// count returns the lines the CDX API answers for every file and how many of
// them are distinct; -1, -1 when the API does not answer.
func (r *restartRig) count() (lines, distinct int) {
	return cdxLines(fmt.Sprintf("http://127.0.0.1:%d/cdx?url=example.com&matchType=domain", r.port))
}

// cdxLines returns the lines a CDX query answers and how many of them are
// distinct; -1, -1 when the API does not answer.
func cdxLines(query string) (lines, distinct int) {
	resp, err := http.Get(query)
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return -1, -1
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			lines++
			seen[l] = true
		}
	}
	return lines, len(seen)
}

// waitAnswered waits until the API answers at least one line.
func (r *restartRig) waitAnswered(t *testing.T) {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := r.count(); n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing was ever answered")
		}
	}
}

// waitComplete waits until every record is answered, failing on a duplicate
// line or on more lines than records.
func (r *restartRig) waitComplete(t *testing.T) {
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		lines, distinct := r.count()
		if lines < 0 {
			lines, distinct = 0, 0
		}
		if lines != distinct {
			t.Fatalf("%d lines answered, only %d distinct: duplicates", lines, distinct)
		}
		if lines == r.want {
			return
		}
		if lines > r.want || time.Now().After(deadline) {
			t.Fatalf("%d lines answered, want %d", lines, r.want)
		}
	}
}

// TestStoppingMidTaskLosesAndDuplicatesNothing: the indexer and the
// aggregator are stopped while files are being indexed and merged, and
// started again on the same state: every record of every file is answered
// by the CDX API exactly once.
func TestStoppingMidTaskLosesAndDuplicatesNothing(t *testing.T) {
	r := newRestartRig(t, 8, 3<<20)
	ix := testenv.StartServiceIn(t, indexer.Definition(), r.ixShared, r.ixEnv)
	agg := testenv.StartServiceIn(t, aggregator.Definition(), r.aggShared, r.aggEnv)
	r.waitAnswered(t)
	ix.Stop()
	agg.Stop()
	if n, _ := r.count(); n != -1 {
		t.Fatal("the aggregator still answers after its stop")
	}
	testenv.StartServiceIn(t, indexer.Definition(), r.ixShared, r.ixEnv)
	testenv.StartServiceIn(t, aggregator.Definition(), r.aggShared, r.aggEnv)
	r.waitComplete(t)
}

// TestKillingMidTaskLosesAndDuplicatesNothing runs the indexer and the
// aggregator as their own processes and kills them with SIGKILL (no drain,
// no deferred cleanup) while they work: the indexer while a file is being
// indexed, the aggregator while recorded outputs wait to be merged. Started
// again on the same state, they answer every record exactly once.
func TestKillingMidTaskLosesAndDuplicatesNothing(t *testing.T) {
	ctx := context.Background()
	r := newRestartRig(t, 16, 4<<20)
	ixDB, err := pgxpool.New(ctx, r.ixShared.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer ixDB.Close()
	aggDB, err := pgxpool.New(ctx, r.aggShared.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer aggDB.Close()
	// waitFor polls q until it returns true; false if the work ended first.
	// The windows it looks for are short (an output waits at most a merge
	// interval), so it polls the database every 2 ms and asks the CDX API,
	// which reads every line, only twice a second.
	waitFor := func(db *pgxpool.Pool, q string) bool {
		lastCount := time.Now()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			var ok bool
			if err := db.QueryRow(ctx, q).Scan(&ok); err == nil && ok {
				return true
			}
			if time.Since(lastCount) < 500*time.Millisecond {
				continue
			}
			lastCount = time.Now()
			if lines, _ := r.count(); lines == r.want {
				return false
			}
		}
		return false
	}
	const indexing = `SELECT EXISTS (SELECT FROM indexer.files WHERE status = 'indexing')`
	const unmerged = `SELECT EXISTS (SELECT FROM aggregator.outputs WHERE build IS NULL AND NOT withdrawn)`
	const ixPkg, aggPkg = "github.com/archivist/archivist/services/indexer", "github.com/archivist/archivist/services/aggregator"
	agg := testenv.StartProcess(t, aggPkg, r.aggShared, r.blobDir, r.aggEnv)
	ix := testenv.StartProcess(t, ixPkg, r.ixShared, r.blobDir, r.ixEnv)
	// Rounds go on until two kills of each kind have landed mid-task (at
	// most 24 rounds): on a loaded machine a restarted process may take
	// long enough to come up that a round's work ends before a kill.
	kills, ixKills, aggKills := 0, 0, 0
	for round := 0; round < 24 && (ixKills < 2 || aggKills < 2 || kills < 4); round++ {
		var indexed int
		ixDB.QueryRow(ctx, `SELECT count(*) FROM indexer.files WHERE status = 'indexed'`).Scan(&indexed)
		if round > 0 {
			// Each round brings work of its own: a restarted indexer that
			// took every file left in a burst leaves none to be killed in,
			// and an aggregator that merged every output leaves none
			// waiting.
			r.add(t)
			r.add(t)
		}
		if round%2 == 0 && waitFor(ixDB, indexing) {
			ix.Kill()
			ix = testenv.StartProcess(t, ixPkg, r.ixShared, r.blobDir, r.ixEnv)
			t.Logf("killed the indexer mid-file (%d of %d files indexed)", indexed, r.files)
			kills++
			ixKills++
		} else if round%2 == 1 && waitFor(aggDB, unmerged) {
			agg.Kill()
			agg = testenv.StartProcess(t, aggPkg, r.aggShared, r.blobDir, r.aggEnv)
			t.Logf("killed the aggregator with outputs unmerged (%d of %d files indexed)", indexed, r.files)
			kills++
			aggKills++
		}
		if lines, distinct := r.count(); lines != distinct {
			t.Fatalf("after kill %d: %d lines answered, only %d distinct", round, lines, distinct)
		}
	}
	if kills < 4 || ixKills < 2 || aggKills < 2 {
		t.Errorf("only %d kills landed mid-task (%d of the indexer, %d of the aggregator) in 24 rounds; the work is too small to test this", kills, ixKills, aggKills)
	}
	ix.Kill()
	agg.Kill()
	testenv.StartProcess(t, ixPkg, r.ixShared, r.blobDir, r.ixEnv)
	testenv.StartProcess(t, aggPkg, r.aggShared, r.blobDir, r.aggEnv)
	r.waitComplete(t)
}
