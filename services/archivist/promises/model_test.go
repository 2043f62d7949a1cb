package promises_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/devkit/ezid"
	"github.com/archivist/archivist/devkit/natsserver"
	"github.com/archivist/archivist/devkit/pgcluster"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/origin"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
)

var (
	modelHistories = flag.Int("model-histories", 240,
		"how many random histories TestArchiveModel runs (each a few deposits, withdrawals and reinstatements of its own objects)")
	modelFor = flag.Duration("model", 0,
		"run TestArchiveModel's histories for this long instead of -model-histories (go test ./services/archivist/promises -run ArchiveModel -model 2h)")
	modelSeed = flag.Uint64("model-seed", 0,
		"the seed of TestArchiveModel's first history (0: from the clock); a failing history prints its seed")
	modelOnly = flag.String("model-only", "",
		"comma-separated history seeds: TestArchiveModel runs these alone (a failure to reproduce)")
)

// modelServices are the services the archive's promises run through.
var modelServices = []string{"curator", "indexer", "aggregator", "auditor"}

// The depositors of the model: each may supply new objects' ARKs under a
// NAAN of its own and a NAAN they share (two depositors of one
// institution), into one collection they share.
const (
	modelShared     = "ark:/13039"
	modelShoulder   = "ark:/99999/fk7" // the archive's own (INGEST_ARK_PREFIX)
	modelOperator   = "ops"
	modelCollection = "shared"
)

var modelDepositors = map[string]string{"alice": "ark:/13030", "bob": "ark:/13031"}

// TestArchiveModel checks the archive's promises where pipelines and
// depositors meet, against a model of the archive (docs/PROMISES.md): it
// runs the real curator, indexer, aggregator and auditor as processes,
// and drives them through random, seeded histories of two depositors:
// minted and supplied ARKs (spelled in every way that names one
// identifier, and with one more ':', which names another), add and update
// modes, same-named files and WARCs, two deposits of one object at once,
// withdrawals of objects and versions and reinstatements, another
// depositor's ARK and the archive's own shoulder supplied; meanwhile index
// announcements are delayed, duplicated and reordered, processes are
// killed, and once PostgreSQL is restored to an earlier backup (the
// backup taken while announcements wait on the bus for the aggregator,
// down, which records them after it; the histories after it re-deposit
// what the restore lost). After the system
// settles it checks every invariant:
//
//   - no stored version's bytes changed (any key ever seen under objects/
//     holds what it first held, or nothing);
//   - each version's inventory is exactly its mode's file set (add: the
//     previous version's files that the deposit does not replace, and its
//     own; update: its own);
//   - every deposit ended as the model says (a deposit into a withdrawn
//     object, of another depositor's ARK, or under the archive's shoulder
//     fails, saying why; the others complete);
//   - every stored archive file that no version still holds is withdrawn
//     is answered by the CDX API, and no withdrawn one is;
//   - no ARK names two objects (across the restore too), no object has two
//     depositors, and EZID's record of each ARK is its object's.
//
// CI runs -model-histories (240) with one restore; -model D runs rounds
// of 240 more, each with a restore, for D.
// A failing history's seed is printed: -model-only SEED runs it alone, and
// seeds kept in testdata/model-seeds.txt run first, every time.
func TestArchiveModel(t *testing.T) {
	w := newModelWorld(t)
	seeds := w.seeds()
	t.Logf("model: %d histories from seed %d (-model-seed), %d kept as regressions", len(seeds.fresh), seeds.first, len(seeds.kept))
	all := append(slices.Clone(seeds.kept), seeds.fresh...)
	stopFaults := w.faults()
	var done []*mhistory
	var lost []*mhistory
	start := time.Now()
	runPhase := func(hs []*mhistory) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 12)
		for _, h := range hs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				h.run(w)
			}()
		}
		wg.Wait()
	}
	histories := func(seeds []uint64) []*mhistory {
		var hs []*mhistory
		for _, s := range seeds {
			hs = append(hs, newHistory(w.nextID(), s))
		}
		return hs
	}
	// A round: histories before a backup; then histories the restore will
	// lose; the restore; histories that deposit what was lost again, and
	// the rest.
	round := func(seeds []uint64) {
		if *modelOnly != "" || len(seeds) < 20 {
			hs := histories(seeds)
			runPhase(hs)
			done = append(done, hs...)
			return
		}
		k := len(seeds) * 2 / 5
		first := histories(seeds[:k/2])
		runPhase(first)
		w.settle(first)
		// Histories deposit while the aggregator is down: their
		// announcements wait on the bus through the backup, are recorded
		// after it, and are lost with the restore; the aggregator must
		// take them again from the bus.
		w.stop("aggregator")
		waiting := histories(seeds[k/2 : k/2+4])
		runPhase(waiting)
		w.settle(waiting)
		w.backup()
		w.restart("aggregator")
		done = append(done, first...)
		done = append(done, waiting...)
		gone := histories(seeds[k/2+4 : k])
		runPhase(gone)
		late := w.lateTakedowns(first)
		w.settle(gone)
		w.observeStore() // what the store held before the restore: it must keep it
		w.checkIdentities(gone)
		w.restore()
		w.awaitReplay(late, gone)
		lost = append(lost, gone...)
		var again []*mhistory
		for _, h := range gone {
			again = append(again, h.redepositOf(w.nextID()))
		}
		rest := append(again, histories(seeds[k:])...)
		runPhase(rest)
		done = append(done, rest...)
	}
	round(all)
	for *modelFor > 0 && time.Since(start) < *modelFor {
		round(w.freshSeeds(240))
	}
	stopFaults()
	w.settle(done)
	w.observeStore()
	w.check(done)
	w.checkIdentities(append(done, lost...))
	w.checkStore()
	ops := 0
	for _, h := range done {
		ops += len(h.log)
	}
	t.Logf("model: %d histories (%d operations; %d lost to the restore and deposited again) in %s; %d kills, %d announcements replayed late, %d restores, %d files indexed again by an operator (%d of withdrawn objects)",
		len(done), ops, len(lost), time.Since(start).Round(time.Second), w.kills.Load(), w.replayed.Load(), w.restores, w.reindexed.Load(), w.reindexedWithdrawn.Load())
	if t.Failed() {
		var failed []string
		for _, h := range append(done, lost...) {
			if h.failed.Load() {
				failed = append(failed, strconv.FormatUint(h.seed, 10))
			}
		}
		t.Logf("model: failing history seeds (run one: -model-only SEED; keep it in testdata/model-seeds.txt): %s", strings.Join(failed, ","))
	}
}

// modelWorld is the archive the histories run in: NATS, a PostgreSQL
// cluster it can back up and restore, a blob directory, an origin and an
// EZID, and the services as processes it can kill.
type modelWorld struct {
	t       *testing.T
	pg      *pgcluster.Cluster
	backupD string
	ns      *server.Server
	sh      testenv.Shared
	blobDir string
	bs      blob.Store
	files   *origin.Origin
	org     *httptest.Server
	ezid    *ezid.Server
	env     map[string]map[string]string
	api     map[string]string
	tokens  map[string]string
	db      *pgxpool.Pool

	mu    sync.Mutex
	procs map[string]*testenv.Process
	// down are the services the model keeps stopped: the killer leaves
	// them be.
	down map[string]bool
	// paused holds the killer while the world is backed up or restored,
	// and while a service is stopped or started again.
	paused   sync.RWMutex
	ids      atomic.Int64
	kills    atomic.Int64
	replayed atomic.Int64
	// reindexed counts the archive files an operator had indexed again
	// through the work kit, and how many of them a withdrawn object's.
	reindexed, reindexedWithdrawn atomic.Int64
	restores                      int
	// seen is every key ever seen under objects/ and its sha256: a stored
	// version's bytes never change.
	seen map[string]string
	// arks is every ARK (normal form) an object was given, across the
	// restore, and the identity it named.
	arks map[string]string
	// hosts is the host of each deposited WARC's captures, by its sha256.
	hostsMu sync.Mutex
	hosts   map[string]string
}

func newModelWorld(t *testing.T) *modelWorld {
	t.Helper()
	ctx := context.Background()
	w := &modelWorld{t: t, blobDir: t.TempDir(), env: map[string]map[string]string{}, api: map[string]string{},
		procs: map[string]*testenv.Process{}, down: map[string]bool{}, seen: map[string]string{}, arks: map[string]string{}, hosts: map[string]string{}}
	w.pg = testenv.PrivatePostgres(t)
	admin, err := pgxpool.New(ctx, w.pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE archivist"); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	natsOpt := natsserver.Options{Port: testenv.FreePort(t), StoreDir: t.TempDir(), ServerName: "model"}
	if w.ns, err = natsserver.Start(natsOpt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsserver.Stop(w.ns) })
	if w.bs, err = blob.NewLocal(w.blobDir); err != nil {
		t.Fatal(err)
	}
	w.sh = testenv.Shared{NATSURL: w.ns.ClientURL(), DBURL: w.pg.URL("archivist")}
	w.files = origin.New(nil)
	w.org = httptest.NewServer(w.files)
	t.Cleanup(w.org.Close)
	w.ezid = ezid.Start("archivist", "ezid-secret")
	t.Cleanup(w.ezid.Close)
	keys := []testenv.APIKey{{Name: modelOperator, Roles: []apiauth.Role{apiauth.Operator}}}
	for name, naan := range modelDepositors {
		keys = append(keys, testenv.APIKey{Name: name, Roles: []apiauth.Role{apiauth.Publisher}, Source: name,
			Collections: []string{modelCollection}, ARKs: []string{naan, modelShared}})
	}
	keysFile, tokens := testenv.KeysFile(t, keys...)
	w.tokens = tokens
	for _, name := range modelServices {
		port := testenv.FreePort(t)
		w.api[name] = fmt.Sprintf("http://127.0.0.1:%d", port)
		w.env[name] = map[string]string{strings.ToUpper(name) + "_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port),
			"API_AUTH": "keys", "API_KEYS_FILE": keysFile, "API_RATE_LIMIT": "0"}
	}
	set := func(name string, kv ...string) {
		for i := 0; i < len(kv); i += 2 {
			w.env[name][kv[i]] = kv[i+1]
		}
	}
	// A kill is a failed attempt by design, and the model kills often.
	set("curator", "INGEST_ALLOW_PRIVATE", "true", "INGEST_INTERVAL", "100ms", "INGEST_MIN_FREE_BYTES", "1048576",
		"INGEST_WORK_DIR", t.TempDir(), "INGEST_MAX_ATTEMPTS", "50", "INGEST_RETRY_MAX", "1s", "INGEST_CONCURRENCY", "16", "INGEST_TIDY_INTERVAL", "1s",
		"INGEST_ARK_PREFIX", modelShoulder, "INGEST_EZID_URL", w.ezid.URL, "INGEST_EZID_USER", "archivist", "INGEST_EZID_PASSWORD", "ezid-secret")
	set("indexer", "INDEXER_REPOSITORY_PREFIX", "objects/", "INDEXER_SCAN_INTERVAL", "500ms", "INDEXER_DISPATCH_INTERVAL", "100ms",
		"INDEXER_RETRY_BASE", "200ms", "INDEXER_RETRY_MAX", "2s", "INDEXER_STALE_AFTER", "10s", "INDEXER_MAX_FAILURES", "50",
		"INDEXER_WORK_DIR", t.TempDir())
	set("aggregator", "AGGREGATOR_MERGE_INTERVAL", "250ms", "AGGREGATOR_RETIRE_AFTER", "1h", "AGGREGATOR_ACCESS_POINTS", "public")
	set("auditor", "AUDITOR_SCHEDULE_TICK", "1s", "AUDITOR_IDLE_BACKOFF_MIN", "500ms", "AUDITOR_IDLE_BACKOFF_MAX", "2s",
		"AUDITOR_RECONCILE_PREFIX", "objects/", "AUDITOR_RECONCILE_TICK", "1s")
	for _, name := range modelServices {
		w.start(name)
	}
	if w.db, err = pgxpool.New(ctx, w.sh.DBURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.db.Close)
	w.relay()
	return w
}

func (w *modelWorld) start(name string) {
	p := testenv.StartProcess(w.t, "github.com/archivist/archivist/services/"+name, w.sh, w.blobDir, w.env[name])
	w.mu.Lock()
	w.procs[name] = p
	w.mu.Unlock()
}

func (w *modelWorld) nextID() int { return int(w.ids.Add(1)) }

// stop kills service name and keeps it down (the killer leaves it be)
// until restart. It holds paused, as the killer does from reading down to
// starting again: a killer between the two would start the service stop
// has just killed, and restart would start a second beside it.
func (w *modelWorld) stop(name string) {
	w.paused.Lock()
	defer w.paused.Unlock()
	w.mu.Lock()
	w.down[name] = true
	p := w.procs[name]
	w.mu.Unlock()
	p.Kill()
}

// restart starts a service stop kept down.
func (w *modelWorld) restart(name string) {
	w.paused.Lock()
	defer w.paused.Unlock()
	w.start(name)
	w.mu.Lock()
	delete(w.down, name)
	w.mu.Unlock()
}

// faults kills a random service every 1 to 4 seconds and starts it again
// (not while the world is restored), until the returned func is called.
func (w *modelWorld) faults() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(1000+rand.IntN(3000)) * time.Millisecond):
			}
			w.paused.RLock()
			name := modelServices[rand.IntN(len(modelServices))]
			w.mu.Lock()
			p, down := w.procs[name], w.down[name]
			w.mu.Unlock()
			if down {
				w.paused.RUnlock()
				continue
			}
			p.Kill()
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
			w.start(name)
			w.kills.Add(1)
			w.paused.RUnlock()
		}
	}()
	return func() { cancel(); <-done }
}

// relay delays, duplicates and reorders the indexers' announcements: a
// copy of each index.cdx.ready (a new message id, so that no de-duplication
// hides it) is sent again 0.5 to 5 seconds later, after announcements made
// meanwhile and, often, after its file was withdrawn.
func (w *modelWorld) relay() {
	nc, err := nats.Connect(w.sh.NATSURL, nats.MaxReconnects(-1))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		w.t.Fatal(err)
	}
	_, err = nc.Subscribe(events.SubjectIndexCDXReady, func(m *nats.Msg) {
		if m.Header.Get("Model-Replay") != "" {
			return
		}
		copyMsg := &nats.Msg{Subject: m.Subject, Data: slices.Clone(m.Data), Header: nats.Header{}}
		for k, v := range m.Header {
			if k != jetstream.MsgIDHeader {
				copyMsg.Header[k] = slices.Clone(v)
			}
		}
		copyMsg.Header.Set("Model-Replay", "1")
		go func() {
			time.Sleep(time.Duration(500+rand.IntN(4500)) * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := js.PublishMsg(ctx, copyMsg); err == nil {
				w.replayed.Add(1)
			}
		}()
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// backup stops PostgreSQL, copies its data directory, and starts it again:
// the backup the restore goes back to.
func (w *modelWorld) backup() {
	w.paused.Lock()
	defer w.paused.Unlock()
	w.t.Log("model: backing PostgreSQL up")
	if err := w.pg.Stop(); err != nil {
		w.t.Fatal(err)
	}
	w.backupD = filepath.Join(w.t.TempDir(), "backup")
	if out, err := exec.Command("cp", "-a", w.pg.Dir, w.backupD).CombinedOutput(); err != nil {
		w.t.Fatalf("back up: %v: %s", err, out)
	}
	if err := w.pg.Start(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

// restore stops every service and PostgreSQL, puts the backup's data
// directory in place, and starts them again: what was written since the
// backup is lost to the database, not to the store, NATS or EZID.
func (w *modelWorld) restore() {
	w.paused.Lock()
	defer w.paused.Unlock()
	w.t.Log("model: restoring PostgreSQL to the backup")
	w.mu.Lock()
	for _, p := range w.procs {
		p.Kill()
	}
	w.mu.Unlock()
	w.db.Reset()
	if err := w.pg.Stop(); err != nil {
		w.t.Fatal(err)
	}
	if err := os.RemoveAll(w.pg.Dir); err != nil {
		w.t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", w.backupD, w.pg.Dir).CombinedOutput(); err != nil {
		w.t.Fatalf("restore: %v: %s", err, out)
	}
	if err := w.pg.Start(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	for _, name := range modelServices {
		w.start(name)
	}
	w.restores++
}

// call sends a request as who (a depositor or the operator) and decodes a
// JSON answer into out; it retries while the service is down (killed)
// and answers 5xx, or 409 to a withdrawal (waiting for an ingest), for two
// minutes.
func (w *modelWorld) call(who, method, u string, hdr map[string]string, body, out any) (int, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, err := w.callOnce(who, method, u, hdr, body, out)
		if err == nil && code < 500 && (code != http.StatusConflict || !strings.HasSuffix(u, "/withdraw")) && code != http.StatusTooManyRequests {
			return code, nil
		}
		var refused *refusal
		if errors.As(err, &refused) && code < 500 && (code != http.StatusConflict || !strings.HasSuffix(u, "/withdraw")) {
			return code, err
		}
		if time.Now().After(deadline) {
			return code, fmt.Errorf("%s %s: %d %v", method, u, code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (w *modelWorld) callOnce(who, method, u string, hdr map[string]string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.tokens[who])
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, &refusal{fmt.Sprintf("%s %s: %d %s", method, u, resp.StatusCode, bytes.TrimSpace(b))}
	}
	if out != nil && resp.StatusCode < 300 {
		if s, ok := out.(*string); ok {
			*s = string(b)
		} else if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

// refusal is a request a service answered with 4xx or 5xx, and why.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// query runs a query of the test's own on the archive's database, again
// while PostgreSQL is away (restored).
func (w *modelWorld) query(sql string, args ...any) [][]any {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		rows, err := w.db.Query(context.Background(), sql, args...)
		if err == nil {
			var out [][]any
			for rows.Next() {
				v, err := rows.Values()
				if err != nil {
					rows.Close()
					w.t.Fatal(err)
				}
				out = append(out, v)
			}
			rows.Close()
			if err = rows.Err(); err == nil {
				return out
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("model query %s: %v", sql, err)
		}
	}
}

// seedSet is the histories' seeds: those kept as regressions, then new.
type seedSet struct {
	first       uint64
	kept, fresh []uint64
}

func (w *modelWorld) seeds() seedSet {
	var s seedSet
	if *modelOnly != "" {
		for _, f := range strings.Split(*modelOnly, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				w.t.Fatalf("-model-only %q: %v", f, err)
			}
			s.fresh = append(s.fresh, n)
		}
		return s
	}
	if f, err := os.Open("testdata/model-seeds.txt"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			if n, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64); err == nil {
				s.kept = append(s.kept, n)
			}
		}
		f.Close()
	}
	s.first = *modelSeed
	if s.first == 0 {
		s.first = uint64(time.Now().UnixNano())
	}
	seedNext = s.first
	s.fresh = w.freshSeeds(*modelHistories)
	return s
}

// seedNext is the next fresh history seed.
var seedNext uint64

func (w *modelWorld) freshSeeds(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = seedNext
		seedNext = seedNext*6364136223846793005 + 1442695040888963407
	}
	return out
}

// mhistory is one random history: its own objects and what it did to them.
type mhistory struct {
	id     int
	seed   uint64
	r      *rand.Rand
	objs   []*mobj
	log    []string
	failed atomic.Bool
	// redeposit: the history re-deposits a restored-away history's objects.
	redeposit *mhistory
}

// mobj is an object as the model knows it.
type mobj struct {
	owner   string
	localID string // minted objects
	// supplied is the ARK as its depositor first supplied it ("" minted).
	supplied string
	// ark is the ARK as the archive holds it (after its first deposit).
	ark       string
	title     string
	withdrawn bool
	// gone: the object's first deposit failed; it is not in the archive.
	gone     bool
	deposits []*mdeposit
}

// identity is what names the object in the model: its depositor and local
// id, or its depositor and its supplied ARK's normal form.
func (o *mobj) identity() string {
	if o.localID != "" {
		return o.owner + " local " + o.localID
	}
	n, _ := ark.Normalize(o.supplied)
	return o.owner + " ark " + n
}

// mdeposit is one deposit: its batch, mode, files (name → content), and
// whether it must complete.
type mdeposit struct {
	obj       *mobj
	batch     int64
	mode      string
	files     map[string][]byte
	mustFail  string // a piece of the failure's reason, "" when it must complete
	job       int64
	version   int
	completed bool
}

func newHistory(id int, seed uint64) *mhistory {
	return &mhistory{id: id, seed: seed, r: rand.New(rand.NewPCG(seed, 47))}
}

func (h *mhistory) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

// errorf fails the test for this history, with its seed and its steps.
func (h *mhistory) errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	h.failed.Store(true)
	t.Errorf("history %d (seed %d): %s\n  steps: %s", h.id, h.seed, fmt.Sprintf(format, args...), strings.Join(h.log, "; "))
}

func (h *mhistory) other(who string) string {
	if who == "alice" {
		return "bob"
	}
	return "alice"
}

// run plays the history: 3 to 8 random steps.
func (h *mhistory) run(w *modelWorld) {
	if h.redeposit != nil {
		h.runRedeposit(w)
		return
	}
	owners := []string{"alice", "bob"}
	h.newObject(w, owners[h.r.IntN(2)])
	for range 2 + h.r.IntN(6) {
		live := h.live()
		switch n := h.r.IntN(100); {
		case n < 12 || len(live) == 0:
			h.newObject(w, owners[h.r.IntN(2)])
		case n < 40:
			o := live[h.r.IntN(len(live))]
			h.deposit(w, o, h.mode(), o.owner)
		case n < 52:
			o := live[h.r.IntN(len(live))]
			h.depositTwice(w, o)
		case n < 60:
			h.steal(w, live[h.r.IntN(len(live))])
		case n < 67:
			h.oneMoreColon(w, live[h.r.IntN(len(live))])
		case n < 71:
			h.ownShoulder(w, owners[h.r.IntN(2)])
		case n < 84:
			h.withdraw(w, live[h.r.IntN(len(live))])
		case n < 88:
			// An operator has an object's archive files indexed again
			// through the work kit (#50): a live object's are answered once,
			// a withdrawn one's stay unanswered.
			h.reindex(w, h.objs[h.r.IntN(len(h.objs))])
		default:
			var withdrawn []*mobj
			for _, o := range h.objs {
				if o.withdrawn {
					withdrawn = append(withdrawn, o)
				}
			}
			if len(withdrawn) == 0 {
				h.withdraw(w, live[h.r.IntN(len(live))])
				continue
			}
			h.reinstate(w, withdrawn[h.r.IntN(len(withdrawn))])
		}
	}
}

// live are the history's objects the archive holds.
func (h *mhistory) live() []*mobj {
	var out []*mobj
	for _, o := range h.objs {
		if !o.gone && o.ark != "" {
			out = append(out, o)
		}
	}
	return out
}

func (h *mhistory) mode() string {
	if h.r.IntN(3) == 0 {
		return "update"
	}
	return "add"
}

// files are 1 to 3 files of random names, some the names earlier
// deposits used (a file replaced), a WARC among them at times; each body
// is new (a WARC's captures are of a host of its own).
func (h *mhistory) files(w *modelWorld) map[string][]byte {
	names := []string{"a.txt", "b.txt", "crawl.warc.gz", "pages/c.txt"}
	out := map[string][]byte{}
	for range 1 + h.r.IntN(3) {
		name := names[h.r.IntN(len(names))]
		n := w.nextID()
		if strings.HasSuffix(name, ".warc.gz") {
			host := fmt.Sprintf("h%d-%d.model.example", h.id, n)
			out[name] = warctest.Gzipped(host, 2)
			w.hostsMu.Lock()
			w.hosts[sumOf(out[name])] = host
			w.hostsMu.Unlock()
		} else {
			out[name] = []byte(fmt.Sprintf("history %d file %s, deposit %d: %x", h.id, name, n, h.r.Uint64()))
		}
	}
	return out
}

// newObject deposits a new object of who's: minted (a local id), or
// under an ARK it supplies (its own NAAN or the shared one).
func (h *mhistory) newObject(w *modelWorld, who string) {
	o := &mobj{owner: who, title: fmt.Sprintf("History %d object %d", h.id, len(h.objs))}
	if h.r.IntN(2) == 0 {
		o.localID = fmt.Sprintf("h%d-o%d-%d", h.id, len(h.objs), w.nextID())
	} else {
		naan := modelDepositors[who]
		if h.r.IntN(2) == 0 {
			naan = modelShared
		}
		o.supplied = fmt.Sprintf("%s/h%do%d", naan, h.id, w.nextID())
	}
	h.objs = append(h.objs, o)
	d := h.deposit(w, o, "add", who)
	if d.completed {
		h.learnARK(w, o, d)
	} else {
		o.gone = true
	}
}

// learnARK reads the ARK the object's first deposit got.
func (h *mhistory) learnARK(w *modelWorld, o *mobj, d *mdeposit) {
	rows := w.query(`SELECT ark FROM curator.jobs WHERE id = $1`, d.job)
	if len(rows) == 1 {
		o.ark = rows[0][0].(string)
	}
}

// spelling is another spelling of the ARK a (one identifier).
func (h *mhistory) spelling(a string) string {
	naan, name, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "ark:"), "/"), "/")
	switch h.r.IntN(5) {
	case 0:
		return "ark:" + naan + "/" + name
	case 1:
		return "ARK:/" + naan + "/" + name + "/"
	case 2:
		if len(name) > 2 {
			return "ark:/" + naan + "/" + name[:2] + "-" + name[2:]
		}
	case 3:
		return "ark:/" + naan + "/" + name + "."
	}
	return a
}

// deposit deposits files into o as who, in mode, and waits for its end.
func (h *mhistory) deposit(w *modelWorld, o *mobj, mode, who string) *mdeposit {
	d := h.submit(w, o, mode, who, h.files(w), "")
	if o.withdrawn {
		d.mustFail = "withdrawn"
	}
	h.await(w, d)
	return d
}

// submit submits a deposit (an object manifest) and returns it, not
// waiting. primary, when not "", is the ARK supplied instead of the
// object's own.
func (h *mhistory) submit(w *modelWorld, o *mobj, mode, who string, files map[string][]byte, primary string) *mdeposit {
	d := &mdeposit{obj: o, mode: mode, files: files}
	o.deposits = append(o.deposits, d)
	n := w.nextID()
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n")
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := fmt.Sprintf("/h%d/d%d/%s", h.id, n, name)
		w.files.Add(p, files[name])
		fmt.Fprintf(&m, "%s%s | %s | %s\n", w.org.URL, p, name, o.localID)
	}
	mp := fmt.Sprintf("/h%d/d%d.checkm", h.id, n)
	w.files.Add(mp, []byte(m.String()))
	sub := map[string]any{"profile": modelCollection, "payload_url": w.org.URL + mp, "type": "manifest", "submission_mode": mode, "title": o.title}
	switch {
	case primary != "":
		sub["primary"] = primary
	case o.supplied != "":
		sub["primary"] = h.spelling(o.supplied)
	}
	if p, ok := sub["primary"]; ok {
		h.logf("%s deposits %v (%s, %d files)", who, p, mode, len(files))
	} else {
		h.logf("%s deposits local id %s (%s, %d files)", who, o.localID, mode, len(files))
	}
	var out struct {
		Batch int64 `json:"batch"`
	}
	code, err := w.call(who, "POST", w.api["curator"]+"/v1/batches", map[string]string{"Idempotency-Key": fmt.Sprintf("model-%d", n)}, sub, &out)
	if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
		h.errorf(w.t, "submit: %d %v", code, err)
		return d
	}
	d.batch = out.Batch
	return d
}

// await waits for the deposit's batch to end and reads its job.
func (h *mhistory) await(w *modelWorld, d *mdeposit) {
	if d.batch == 0 {
		return
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		rows := w.query(`SELECT b.state, coalesce(j.id, 0), coalesce(j.state, ''), coalesce(j.error, ''), coalesce(j.version, 0), coalesce(b.error, '')
			FROM curator.batches b LEFT JOIN curator.jobs j ON j.batch_id = b.id WHERE b.id = $1`, d.batch)
		if len(rows) == 1 {
			bstate, job, jstate, jerr, version, berr := rows[0][0].(string), rows[0][1].(int64), rows[0][2].(string), rows[0][3].(string), rows[0][4].(int32), rows[0][5].(string)
			if bstate == "completed" || bstate == "failed" {
				d.job, d.version, d.completed = job, int(version), jstate == "completed"
				switch {
				case d.mustFail == "" && !d.completed:
					h.errorf(w.t, "batch %d (job %d) %s: %s %s, want it completed", d.batch, job, jstate, jerr, berr)
				case d.mustFail != "" && d.completed:
					h.errorf(w.t, "batch %d (job %d) completed, want it failed: %s", d.batch, job, d.mustFail)
				case d.mustFail != "" && !strings.Contains(jerr, d.mustFail):
					h.errorf(w.t, "batch %d (job %d) failed with %q, want %q", d.batch, job, jerr, d.mustFail)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			h.errorf(w.t, "batch %d did not end in 3 minutes: %v", d.batch, rows)
			return
		}
	}
}

// depositTwice deposits into o twice at once (two batches of one object).
func (h *mhistory) depositTwice(w *modelWorld, o *mobj) {
	want := ""
	if o.withdrawn {
		want = "withdrawn"
	}
	a := h.submit(w, o, h.mode(), o.owner, h.files(w), "")
	b := h.submit(w, o, h.mode(), o.owner, h.files(w), "")
	a.mustFail, b.mustFail = want, want
	h.await(w, a)
	h.await(w, b)
}

// steal has the other depositor supply o's ARK, spelled anew: refused.
func (h *mhistory) steal(w *modelWorld, o *mobj) {
	thief := h.other(o.owner)
	probe := &mobj{owner: thief, supplied: o.ark, title: "stolen", gone: true}
	d := h.submit(w, probe, "add", thief, h.files(w), h.spelling(o.ark))
	d.mustFail = "another depositor"
	h.await(w, d)
}

// oneMoreColon has the other depositor supply o's ARK with one more ':':
// another identifier, under the shared NAAN its own new object, else
// refused (under none of its shoulders).
func (h *mhistory) oneMoreColon(w *modelWorld, o *mobj) {
	who := h.other(o.owner)
	naan, name, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(o.ark, "ark:"), "/"), "/")
	// An ARK none of the history's objects has: one more ':' somewhere.
	var colon string
	for range 8 {
		i := 1 + h.r.IntN(max(len(name)-1, 1))
		c := "ark:/" + naan + "/" + name[:i] + ":" + name[i:]
		if !slices.ContainsFunc(h.objs, func(x *mobj) bool {
			return x.ark != "" && ark.Same(x.ark, c) || x.supplied != "" && ark.Same(x.supplied, c)
		}) {
			colon = c
			break
		}
	}
	if colon == "" {
		return
	}
	n := &mobj{owner: who, supplied: colon, title: fmt.Sprintf("History %d object %d", h.id, len(h.objs))}
	h.objs = append(h.objs, n)
	want := ""
	switch {
	case ark.Under(colon, modelShoulder):
		want = "the archive's own shoulder"
	case !ark.Under(colon, modelShared) && !ark.Under(colon, modelDepositors[who]):
		want = "under none of the shoulders"
	}
	d := h.submit(w, n, "add", who, h.files(w), "")
	d.mustFail = want
	h.await(w, d)
	if d.completed {
		h.learnARK(w, n, d)
	} else {
		n.gone = true
	}
}

// ownShoulder has who supply an ARK under the archive's own shoulder that
// names no object: refused.
func (h *mhistory) ownShoulder(w *modelWorld, who string) {
	probe := &mobj{owner: who, supplied: fmt.Sprintf("%szz%d", modelShoulder, w.nextID()), title: "claimed", gone: true}
	d := h.submit(w, probe, "add", who, h.files(w), "")
	d.mustFail = "the archive's own shoulder"
	h.await(w, d)
}

// withdraw withdraws o, or one of its live versions.
func (h *mhistory) withdraw(w *modelWorld, o *mobj) {
	rows := w.query(`SELECT version FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NULL ORDER BY version`, o.ark)
	body := map[string]any{"ark": h.spelling(o.ark), "reason": fmt.Sprintf("model history %d", h.id)}
	if len(rows) > 1 && h.r.IntN(2) == 0 {
		body["version"] = rows[h.r.IntN(len(rows))][0]
	}
	h.logf("withdraw %s version %v", o.ark, body["version"])
	code, err := w.call(modelOperator, "POST", w.api["curator"]+"/v1/objects/withdraw", nil, body, nil)
	if err != nil || code != http.StatusOK {
		h.errorf(w.t, "withdraw %s: %d %v", o.ark, code, err)
		return
	}
	if _, ok := body["version"]; !ok || len(rows) == 1 {
		o.withdrawn = true
	}
	left := w.query(`SELECT count(*) FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NULL`, o.ark)
	if left[0][0].(int64) == 0 {
		o.withdrawn = true
	}
}

// reindex requeues, through the work kit's dry run and confirmed action
// on the indexer, every indexed archive file of o: each is indexed again
// from the start, its new output merged in place of the old (or refused,
// o withdrawn).
func (h *mhistory) reindex(w *modelWorld, o *mobj) {
	if o.ark == "" {
		return
	}
	prefix, err := ark.StoragePrefix(o.ark)
	if err != nil {
		h.errorf(w.t, "reindex %s: %v", o.ark, err)
		return
	}
	for _, row := range w.query(`SELECT name FROM indexer.files WHERE starts_with(name, $1) AND status = 'indexed'`, prefix) {
		q := url.Values{"pipeline": {"index"}, "kind": {"file"}, "id": {row[0].(string)}}
		var dry struct{ Count int }
		q.Set("dry_run", "true")
		if code, err := w.call(modelOperator, "POST", w.api["indexer"]+"/v1/work/requeue?"+q.Encode(), nil, nil, &dry); err != nil || code != http.StatusOK {
			h.errorf(w.t, "dry-run requeue of %s: %d %v", row[0], code, err)
			return
		}
		q.Del("dry_run")
		q.Set("confirm", strconv.Itoa(dry.Count))
		h.logf("reindex %s (%s, withdrawn %v): %d to move", row[0], o.ark, o.withdrawn, dry.Count)
		// 409: the file moved meanwhile, or a kill lost the answer to an
		// action that was taken; the promise checked is the same.
		if code, err := w.call(modelOperator, "POST", w.api["indexer"]+"/v1/work/requeue?"+q.Encode(), nil, nil, nil); err != nil && code != http.StatusConflict {
			h.errorf(w.t, "requeue %s: %d %v", row[0], code, err)
			continue
		}
		w.reindexed.Add(1)
		if o.withdrawn {
			w.reindexedWithdrawn.Add(1)
		}
	}
}

// reinstate reinstates the withdrawn o.
func (h *mhistory) reinstate(w *modelWorld, o *mobj) {
	h.logf("reinstate %s", o.ark)
	code, err := w.call(modelOperator, "POST", w.api["curator"]+"/v1/objects/reinstate", nil,
		map[string]any{"ark": h.spelling(o.ark), "reason": "model"}, nil)
	if code == http.StatusConflict {
		// An answer lost to a kill: reinstated by the first call.
		if rows := w.query(`SELECT withdrawn_at IS NULL FROM curator.inventory_objects WHERE ark = $1`, o.ark); len(rows) == 1 && rows[0][0].(bool) {
			code, err = http.StatusOK, nil // the call's error was the 409 itself
		}
	}
	if err != nil || code != http.StatusOK {
		h.errorf(w.t, "reinstate %s: %d %v", o.ark, code, err)
		return
	}
	o.withdrawn = false
}

// redeposit is a history that deposits again, after the restore, into the
// objects of a history the restore lost.
func (h *mhistory) redepositOf(id int) *mhistory {
	n := newHistory(id, h.seed^0x9e3779b97f4a7c15)
	n.redeposit = h
	return n
}

func (h *mhistory) runRedeposit(w *modelWorld) {
	for _, lost := range h.redeposit.objs {
		if lost.localID == "" && lost.supplied == "" {
			continue
		}
		o := &mobj{owner: lost.owner, localID: lost.localID, supplied: lost.supplied, title: lost.title}
		if o.supplied != "" && (!ark.Under(o.supplied, modelDepositors[o.owner]) && !ark.Under(o.supplied, modelShared)) {
			continue
		}
		h.objs = append(h.objs, o)
		// A takedown the restore lost is applied again from the store's
		// register: an object withdrawn whole takes no deposit.
		o.withdrawn = lost.withdrawn
		d := h.deposit(w, o, "add", o.owner)
		if d.completed {
			h.learnARK(w, o, d)
		} else {
			o.gone = true
		}
	}
}

// lateTakedowns withdraws, after the backup, up to 6 objects of histories
// the backup holds: the restore loses these withdrawals to the database,
// not to the store's register of takedowns, and they must stick.
func (w *modelWorld) lateTakedowns(hs []*mhistory) []*mobj {
	var late []*mobj
	for _, h := range hs {
		for _, o := range h.objs {
			if len(late) == 6 || o.gone || o.ark == "" || o.withdrawn {
				continue
			}
			h.logf("late takedown of %s", o.ark)
			code, err := w.call(modelOperator, "POST", w.api["curator"]+"/v1/objects/withdraw", nil,
				map[string]any{"ark": o.ark, "reason": "a late takedown"}, nil)
			if err != nil || code != http.StatusOK {
				h.errorf(w.t, "late takedown of %s: %d %v", o.ark, code, err)
				continue
			}
			o.withdrawn = true
			late = append(late, o)
		}
	}
	return late
}

// awaitReplay waits until the curator has applied again, from the store's
// register, the takedowns the restore lost: the late ones, and those of
// the histories it lost.
func (w *modelWorld) awaitReplay(late []*mobj, lost []*mhistory) {
	var want []string
	for _, o := range late {
		want = append(want, o.ark)
	}
	for _, h := range lost {
		for _, o := range h.objs {
			if o.withdrawn && o.ark != "" && !o.gone {
				want = append(want, o.ark)
			}
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		rows := w.query(`SELECT count(*) FROM curator.inventory_objects WHERE ark = ANY($1) AND withdrawn_at IS NOT NULL`, want)
		if int(rows[0][0].(int64)) == len(want) {
			return
		}
		if time.Now().After(deadline) {
			var missing []string
			for _, r := range w.query(`SELECT a FROM unnest($1::text[]) a WHERE NOT EXISTS (
				SELECT 1 FROM curator.inventory_objects o WHERE o.ark = a AND o.withdrawn_at IS NOT NULL)`, want) {
				missing = append(missing, r[0].(string))
			}
			w.t.Errorf("model: %d of %d takedowns the restore lost applied again after 2 minutes; not: %v", rows[0][0], len(want), missing)
			return
		}
	}
}

// settle waits until every deposit of hs ended (their own waits saw to
// that) and the indexing of their WARC files caught up: no file queued or
// indexing, none indexed and not announced, and, unless the aggregator is
// kept down (stop), no output unbuilt. Kept down, it builds nothing: an
// output it took just before (a late announcement, an operator's
// re-index, taken by the process the faults had just started) waits for
// its restart, and waiting for it here failed a CI run after 3 minutes.
func (w *modelWorld) settle(hs []*mhistory) {
	w.mu.Lock()
	building := !w.down["aggregator"]
	w.mu.Unlock()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		open := w.query(`SELECT (SELECT count(*) FROM curator.jobs WHERE state NOT IN ('completed', 'failed', 'deleted')),
			(SELECT count(*) FROM curator.ark_versions WHERE withdrawal_until > now())`)
		files := w.query(`SELECT count(*) FROM indexer.files WHERE status IN ('new', 'queued', 'indexing', 'failed') OR (output <> '' AND NOT announced)`)
		outputs := w.query(`SELECT count(*) FROM aggregator.outputs WHERE build IS NULL AND NOT withdrawn`)
		if open[0][0].(int64) == 0 && open[0][1].(int64) == 0 && files[0][0].(int64) == 0 && (outputs[0][0].(int64) == 0 || !building) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Errorf("model: not settled after 3 minutes: jobs open %v, files indexing %v, outputs unbuilt %v (the aggregator building: %v)", open[0], files[0], outputs[0], building)
			return
		}
	}
}

// observeStore reads every key under objects/ and its checksum: a key
// once seen holds the same bytes, or nothing, for ever.
func (w *modelWorld) observeStore() {
	for info, err := range w.bs.List(context.Background(), "objects/") {
		if err != nil {
			w.t.Fatal(err)
		}
		if prev, ok := w.seen[info.Key]; ok && prev != info.Checksum.Value {
			w.t.Errorf("model: %s held sha256 %s, now %s: a stored version's bytes changed", info.Key, prev, info.Checksum.Value)
		}
		w.seen[info.Key] = info.Checksum.Value
	}
}

// checkStore: no key ever seen under objects/ holds other bytes now.
func (w *modelWorld) checkStore() {
	for key, sum := range w.seen {
		info, err := w.bs.Stat(context.Background(), key)
		switch {
		case errors.Is(err, blob.ErrNotFound):
		case err != nil:
			w.t.Fatal(err)
		case info.Checksum.Value != sum:
			w.t.Errorf("model: %s held sha256 %s, now %s: a stored version's bytes changed", key, sum, info.Checksum.Value)
		}
	}
}

// checkIdentities: no ARK names two objects, across the restore (the
// model's identity of every object an ARK was given to, and the arks
// table's one depositor per ARK), and EZID holds each ARK it was given for
// its own object (its title).
func (w *modelWorld) checkIdentities(hs []*mhistory) {
	for _, h := range hs {
		for _, o := range h.objs {
			if o.ark == "" {
				continue
			}
			n, err := ark.Normalize(o.ark)
			if err != nil {
				h.errorf(w.t, "the archive gave %q, not an ARK: %v", o.ark, err)
				continue
			}
			if prev, ok := w.arks[n]; ok && prev != o.identity() {
				h.errorf(w.t, "%s names two objects: %s and %s", o.ark, prev, o.identity())
			}
			w.arks[n] = o.identity()
			if o.localID != "" {
				if got := w.ezid.Identifier(o.ark); got == nil || got["erc.what"] != o.title {
					h.errorf(w.t, "EZID holds %s as %v, want the object titled %q", o.ark, got, o.title)
				}
			}
		}
	}
	rows := w.query(`SELECT count(*) FROM (SELECT norm FROM curator.arks GROUP BY norm HAVING count(DISTINCT (submitter, profile)) > 1) d`)
	if rows[0][0].(int64) != 0 {
		w.t.Errorf("model: %d ARKs have two depositors", rows[0][0])
	}
}

// mversion is a version as the inventory holds it.
type mversion struct {
	version   int
	job       int64
	created   time.Time
	withdrawn *time.Time
	files     map[string]string // path in producer/ → sha256
	keys      map[string]string // path → key
}

// check checks each history's objects against the archive: versions'
// file sets, and the CDX API's answers for every archive file.
func (w *modelWorld) check(hs []*mhistory) {
	for _, h := range hs {
		for _, o := range h.objs {
			if o.gone || o.ark == "" {
				continue
			}
			h.checkVersions(w, o)
		}
	}
	// The CDX API, polled until it agrees (an announcement replayed late,
	// a merge not done yet) or two minutes pass.
	type problem struct {
		h   *mhistory
		msg string
	}
	var problems []problem
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		problems = problems[:0]
		for _, h := range hs {
			for _, o := range h.objs {
				if o.gone || o.ark == "" {
					continue
				}
				for _, msg := range h.checkCDX(w, o) {
					problems = append(problems, problem{h, msg})
				}
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range problems {
		p.h.errorf(w.t, "%s", p.msg)
	}
}

// versions reads o's versions from the inventory.
func (w *modelWorld) versions(a string) []*mversion {
	var out []*mversion
	byNo := map[int]*mversion{}
	for _, r := range w.query(`SELECT version, job_id, created_at, withdrawn_at FROM curator.inventory_versions WHERE ark = $1 ORDER BY version`, a) {
		v := &mversion{version: int(r[0].(int32)), job: r[1].(int64), created: r[2].(time.Time), files: map[string]string{}, keys: map[string]string{}}
		if t, ok := r[3].(time.Time); ok {
			v.withdrawn = &t
		}
		out = append(out, v)
		byNo[v.version] = v
	}
	for _, r := range w.query(`SELECT version, path, key, sha256 FROM curator.inventory_files WHERE ark = $1`, a) {
		v := byNo[int(r[0].(int32))]
		path := r[1].(string)
		v.keys[path] = r[2].(string)
		if name, ok := strings.CutPrefix(path, "producer/"); ok {
			v.files[name] = r[3].(string)
		}
	}
	return out
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkVersions: every version of o is its deposit's, and holds exactly
// its mode's files: update, the deposit's own; add, the files of the
// latest version before it not withdrawn when it was made, but those the
// deposit replaces, and the deposit's own.
func (h *mhistory) checkVersions(w *modelWorld, o *mobj) {
	byJob := map[int64]*mdeposit{}
	completed := 0
	for _, d := range o.deposits {
		if d.completed {
			byJob[d.job] = d
			completed++
		}
	}
	vs := w.versions(o.ark)
	if len(vs) != completed {
		h.errorf(w.t, "%s has %d versions, its completed deposits %d", o.ark, len(vs), completed)
	}
	for i, v := range vs {
		d := byJob[v.job]
		if d == nil {
			h.errorf(w.t, "%s v%d is job %d's, no deposit of the model's", o.ark, v.version, v.job)
			continue
		}
		want := map[string]string{}
		if d.mode == "add" {
			for j := i - 1; j >= 0; j-- {
				if p := vs[j]; p.withdrawn == nil || p.withdrawn.After(v.created) {
					for name, sum := range p.files {
						want[name] = sum
					}
					break
				}
			}
		}
		for name, body := range d.files {
			want[name] = sumOf(body)
		}
		if !mapsEqual(v.files, want) {
			h.errorf(w.t, "%s v%d (%s) holds %v, want %v", o.ark, v.version, d.mode, v.files, want)
		}
		for name, sum := range v.files {
			if k := v.keys["producer/"+name]; w.seen[k] != "" && w.seen[k] != sum {
				h.errorf(w.t, "%s v%d: %s is recorded as %s, the store held %s", o.ark, v.version, k, sum, w.seen[k])
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkCDX: every WARC of o that a version not withdrawn holds is answered
// by the CDX API under its name (events.CDXFileName of its key); none that
// only withdrawn versions held is: in staff's view (/cdx, a key) and at
// the public access point (/public/cdx, no key) alike, a withdrawal
// sticks in every view of the index.
func (h *mhistory) checkCDX(w *modelWorld, o *mobj) []string {
	live := map[string]bool{} // key → held by a version not withdrawn
	for _, v := range w.versions(o.ark) {
		for path, key := range v.keys {
			if strings.HasSuffix(path, ".warc.gz") {
				live[key] = live[key] || v.withdrawn == nil
			}
		}
	}
	var problems []string
	for key, isLive := range live {
		host := warcHost(w, key, o)
		if host == "" {
			continue
		}
		for _, view := range []struct{ who, path string }{{modelOperator, "/cdx"}, {"", "/public/cdx"}} {
			problems = append(problems, checkCDXView(w, o, key, host, isLive, view.who, view.path)...)
		}
	}
	return problems
}

// checkCDXView is checkCDX's look at one WARC in one view of the index.
func checkCDXView(w *modelWorld, o *mobj, key, host string, isLive bool, who, path string) []string {
	var problems []string
	var body string
	code, err := w.call(who, "GET", w.api["aggregator"]+path+"?matchType=domain&url="+url.QueryEscape(host), nil, nil, &body)
	if err != nil || code != http.StatusOK {
		return append(problems, fmt.Sprintf("CDX query of %s at %s: %d %v", host, path, code, err))
	}
	name := events.CDXFileName(key)
	answered := false
	seen := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == name {
			answered = true
			// Each capture of the model's WARCs is of its own URL: a
			// line answered twice is an output merged twice (a file
			// indexed again whose old output was not replaced).
			if seen[line] {
				problems = append(problems, fmt.Sprintf("%s (of %s) is answered twice: %s", key, o.ark, line))
			}
			seen[line] = true
		}
	}
	switch {
	case isLive && !answered:
		problems = append(problems, fmt.Sprintf("%s (of %s, stored, not withdrawn) is not answered by the CDX API at %s", key, o.ark, path))
	case !isLive && answered:
		problems = append(problems, fmt.Sprintf("%s (of %s, withdrawn) is answered by the CDX API at %s", key, o.ark, path))
	}
	return problems
}

// warcHost is the host of the captures of the WARC stored at key: the
// model's deposits give each its own.
func warcHost(w *modelWorld, key string, o *mobj) string {
	for _, v := range w.versions(o.ark) {
		for path, k := range v.keys {
			if name, ok := strings.CutPrefix(path, "producer/"); ok && k == key {
				w.hostsMu.Lock()
				host := w.hosts[v.files[name]]
				w.hostsMu.Unlock()
				return host
			}
		}
	}
	return ""
}

func TestMain(m *testing.M) { testenv.Main(m) }
