package e2e_test

import (
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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/devkit/minioserver"
	"github.com/archivist/archivist/devkit/natsserver"
	"github.com/archivist/archivist/devkit/pgcluster"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest/origin"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

var soakFor = flag.Duration("soak", 30*time.Second,
	"how long TestFaultSoak runs its load and its faults (go test ./services/archivist/e2e -run FaultSoak -soak 10m)")

var soakS3For = flag.Duration("soak-s3", 20*time.Second,
	"how long TestFaultSoakOnS3 runs its load and its faults")

// soakServices are the services the soak test runs, each as its own process.
var soakServices = []string{"curator", "pwa", "cwa", "researcher", "indexer", "aggregator", "auditor"}

// soak is the fault soak test's world: one NATS server and one PostgreSQL
// cluster it can restart, a blob directory, every service as a process it
// can kill, and what its load has sent.
type soak struct {
	t       *testing.T
	pg      *pgcluster.Cluster
	natsOpt natsserver.Options
	ns      *server.Server
	sh      testenv.Shared
	blobDir string
	bs      blob.Store
	env     map[string]map[string]string
	api     map[string]string
	procs   map[string]*testenv.Process
	origin  *httptest.Server
	poison  []byte

	mu    sync.Mutex
	files *origin.Origin // the batches' files and manifests
	sent  soakSent
	// s3 is the S3 server the services store blobs in (nil: a local
	// directory, blobDir).
	s3 *s3Server
}

// s3Server is a MinIO server of the soak's own (a real S3 server), on
// fixed ports and a data directory, which the soak stops and starts again
// with the same objects: a real outage of the store.
type s3Server struct {
	opts minioserver.Options
	srv  *minioserver.Server
}

func newS3Server(t *testing.T) *s3Server {
	t.Helper()
	s := &s3Server{opts: minioserver.Options{Dir: filepath.Join(t.TempDir(), "data"), AccessKey: "soak", SecretKey: "soak-secret",
		Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), ConsoleAddr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}}
	s.start(t)
	t.Cleanup(func() { s.srv.Stop() })
	return s
}

func (s *s3Server) start(t *testing.T) {
	t.Helper()
	var err error
	for range 50 { // the port may linger a moment after a stop
		if s.srv, err = minioserver.Start(context.Background(), s.opts); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("MinIO (the S3 soak runs on a real S3 server): %v", err)
}

// url is BLOB_URL for the bucket.
func (s *s3Server) url(bucket string) string { return s.srv.URL(bucket, "") }

// soakSent counts what the load sent and the faults done.
type soakSent struct {
	Episodes, Clips, Batches, Files, WARCs, WARCLines, AuditChecks int
	Kills, PGRestarts, NATSRestarts, BlobOutages, Retries          int
	hosts                                                          []string
}

// TestFaultSoak runs every service as its own process against one NATS
// server and one PostgreSQL under a steady load of curation records (whose
// episodes and clips are researched with the real locator), ingest batches,
// WARC files and audit checks. For -soak (30 s by default) it kills a
// random service with SIGKILL every few seconds and restarts it, restarts
// PostgreSQL twice and NATS once. Then the load stops and, once the system
// has settled, it checks: every pair researched and its result stored
// once; every batch and job completed, one version per object; every WARC
// line answered once; every stored file checked by the auditor; no lease,
// claim or indexing left; nothing dead-lettered but the one poison message
// the test sent.
// The two soaks run beside each other, after the package's other tests:
// each has a NATS server, a PostgreSQL cluster and a store of its own.
func TestFaultSoak(t *testing.T) {
	t.Parallel()
	runSoak(t, newSoak(t, false), *soakFor)
}

// TestFaultSoakOnS3 is TestFaultSoak with every service's blobs in a
// bucket of a real S3 server (MinIO): its blob store outage stops MinIO.
func TestFaultSoakOnS3(t *testing.T) {
	t.Parallel()
	runSoak(t, newSoak(t, true), *soakS3For)
}

func runSoak(t *testing.T, s *soak, d time.Duration) {
	ctx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); s.load(ctx) }()

	start := time.Now()
	faults := []struct {
		at time.Duration
		do func()
	}{{d / 5, s.restartPostgres}, {2 * d / 5, s.blobOutage}, {3 * d / 5, s.restartNATS}, {4 * d / 5, s.restartPostgres}}
	for time.Since(start) < d {
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		if len(faults) > 0 && time.Since(start) >= faults[0].at {
			faults[0].do()
			faults = faults[1:]
			continue
		}
		s.killOne()
	}
	for _, f := range faults {
		f.do()
	}
	stopLoad()
	<-loadDone
	t.Logf("load and faults stopped after %s; settling", time.Since(start).Round(time.Second))
	s.settle(start, d)
}

func newSoak(t *testing.T, onS3 bool) *soak {
	t.Helper()
	ctx := context.Background()
	s := &soak{t: t, blobDir: t.TempDir(), env: map[string]map[string]string{}, api: map[string]string{},
		procs: map[string]*testenv.Process{}, poison: []byte("\xc1 not msgpack: the soak's poison")}
	s.pg = testenv.PrivatePostgres(t)
	conn, err := pgx.Connect(ctx, s.pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE archivist"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	s.natsOpt = natsserver.Options{Port: testenv.FreePort(t), StoreDir: t.TempDir(), SyncAlways: true, ServerName: "soak"}
	if s.ns, err = natsserver.Start(s.natsOpt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsserver.Stop(s.ns) })
	if onS3 {
		s.s3, s.blobDir = newS3Server(t), ""
		if err := s.s3.srv.MakeBucket(ctx, "soak"); err != nil {
			t.Fatal(err)
		}
		s.bs, err = blob.Open(ctx, blob.Config{URL: s.s3.url("soak"), S3AccessKeyID: "soak", S3SecretAccessKey: "soak-secret"})
	} else {
		s.bs, err = blob.NewLocal(s.blobDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.sh = testenv.Shared{NATSURL: s.ns.ClientURL(), DBURL: s.pg.URL("archivist")}
	s.originServer()

	research := map[string]string{"RESEARCH_LEASE_DURATION": "30s", "RESEARCH_ITEM_TTL": "15s", "RESEARCH_MAX_CLIPS": "4",
		"RESEARCH_LIVENESS_TTL": "2s", "RESEARCH_RETRY_BASE": "200ms", "RESEARCH_RETRY_MAX": "2s"}
	addr := func(name, v string) {
		port := testenv.FreePort(t)
		s.env[name][v] = fmt.Sprintf("127.0.0.1:%d", port)
		s.api[name] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	for _, name := range soakServices {
		s.env[name] = map[string]string{}
		for k, v := range research {
			s.env[name][k] = v
		}
		if s.s3 != nil {
			s.env[name]["BLOB_URL"] = s.s3.url("soak")
			s.env[name]["S3_ACCESS_KEY_ID"], s.env[name]["S3_SECRET_ACCESS_KEY"] = "soak", "soak-secret"
		}
	}
	addr("curator", "CURATOR_HTTP_ADDR")
	addr("pwa", "PWA_HTTP_ADDR")
	addr("indexer", "INDEXER_HTTP_ADDR")
	addr("aggregator", "AGGREGATOR_HTTP_ADDR")
	addr("auditor", "AUDITOR_HTTP_ADDR")
	set := func(name string, kv ...string) {
		for i := 0; i < len(kv); i += 2 {
			s.env[name][kv[i]] = kv[i+1]
		}
	}
	// Bounds a kill counts against are raised: a kill is a failed attempt
	// by design, and the test kills far more often than a cluster would.
	set("curator", "INGEST_ALLOW_PRIVATE", "true", "INGEST_INTERVAL", "100ms", "INGEST_MIN_FREE_BYTES", "1048576",
		"INGEST_WORK_DIR", t.TempDir(), "INGEST_MAX_ATTEMPTS", "20")
	set("pwa", "PWA_INTERVAL", "250ms")
	set("indexer", "INDEXER_REPOSITORY_PREFIX", "warcs/", "INDEXER_SCAN_INTERVAL", "250ms", "INDEXER_DISPATCH_INTERVAL", "100ms", "INDEXER_RETRY_BASE", "200ms", "INDEXER_RETRY_MAX", "2s",
		"INDEXER_TASK_TIMEOUT", "20s", "INDEXER_STALE_AFTER", "30s", "INDEXER_MAX_FAILURES", "20", "INDEXER_WORK_DIR", t.TempDir())
	set("aggregator", "AGGREGATOR_MERGE_INTERVAL", "250ms")
	set("auditor", "AUDITOR_SCHEDULE_TICK", "1s", "AUDITOR_IDLE_BACKOFF_MIN", "500ms", "AUDITOR_IDLE_BACKOFF_MAX", "2s",
		"AUDITOR_FAILURE_DELAY", "1s", "AUDITOR_RETRY_DELAY", "5s")
	for _, name := range soakServices {
		s.start(name)
	}
	// One poison message: the only dead letters the end may show.
	nc, err := nats.Connect(s.sh.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctx, events.CurationSubject("soak", events.TypeEpisodeUpserted), s.poison); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *soak) start(name string) {
	s.procs[name] = testenv.StartProcess(s.t, "github.com/archivist/archivist/services/"+name, s.sh, s.blobDir, s.env[name])
}

// killOne kills a random service with SIGKILL and starts it again.
func (s *soak) killOne() {
	name := soakServices[rand.IntN(len(soakServices))]
	s.procs[name].Kill()
	time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
	s.start(name)
	s.mu.Lock()
	s.sent.Kills++
	s.mu.Unlock()
}

// restartPostgres stops PostgreSQL (a fast shutdown: sessions cut, open
// transactions rolled back) for 3 seconds.
func (s *soak) restartPostgres() {
	s.t.Log("restarting PostgreSQL")
	if err := s.pg.Stop(); err != nil {
		s.t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := s.pg.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.sent.PGRestarts++
	s.mu.Unlock()
}

// blobOutage takes the blob store's directory away (an unmounted volume)
// for 5 seconds, then puts it back: every service that reads or writes
// blobs pauses meanwhile, and nothing may fail or park for it.
func (s *soak) blobOutage() {
	if s.s3 != nil {
		s.t.Log("blob store outage: the S3 server (MinIO) stopped")
		s.s3.srv.Stop()
		time.Sleep(5 * time.Second)
		s.s3.start(s.t)
	} else {
		s.t.Log("blob store outage: its root taken away")
		if err := os.Rename(s.blobDir, s.blobDir+".away"); err != nil {
			s.t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if err := os.Rename(s.blobDir+".away", s.blobDir); err != nil {
			s.t.Fatal(err)
		}
	}
	s.mu.Lock()
	s.sent.BlobOutages++
	s.mu.Unlock()
}

// restartNATS shuts the NATS server down for 2 seconds and starts it again
// on the same port and store.
func (s *soak) restartNATS() {
	s.t.Log("restarting NATS")
	natsserver.Stop(s.ns)
	time.Sleep(2 * time.Second)
	ns, err := natsserver.Start(s.natsOpt)
	if err != nil {
		s.t.Fatal(err)
	}
	s.ns = ns
	s.mu.Lock()
	s.sent.NATSRestarts++
	s.mu.Unlock()
}

// originServer serves the files ingest batches fetch.
func (s *soak) originServer() {
	s.files = origin.New(nil)
	s.origin = httptest.NewServer(s.files)
	s.t.Cleanup(s.origin.Close)
}

// load sends work until ctx ends: a curation record a second (episodes and
// clips, whose audio it stores first), an ingest batch of 3 files every 3
// seconds, a WARC file of 5 records every 2 seconds and an audit check of
// every stored object every 4 seconds. Each is retried, as a client
// would, until a service takes it; the HTTP ones with an Idempotency-Key.
func (s *soak) load(ctx context.Context) {
	for i := range 4 {
		s.curate(events.KindClip, i)
	}
	for i := range 2 {
		s.curate(events.KindEpisode, i)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		sent := s.sent
		s.mu.Unlock()
		switch {
		case n%8 == 0:
			s.curate(events.KindEpisode, sent.Episodes)
		case n%24 == 4 && sent.Clips < soakMaxClips:
			s.curate(events.KindClip, sent.Clips)
		case n%12 == 2:
			s.batch(sent.Batches)
		case n%8 == 6:
			s.warc(sent.WARCs)
		case n%16 == 5:
			s.auditCheck()
		}
	}
}

// soakMaxClips caps the clips the load curates: each episode is researched
// against every clip, so clips without a cap make the research work grow
// with the square of the run's length (a 30-minute run sent 900 episodes
// against 300 clips, 270,000 pairs, hours of research); an archive has
// many episodes and a bounded set of active clips.
const soakMaxClips = 16

// retry runs try until it succeeds, for at most two minutes (a test
// failure then), counting the retries.
func (s *soak) retry(what string, try func() error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Errorf("soak load: %s: still failing after 2 minutes: %v", what, err)
			return
		}
		s.mu.Lock()
		s.sent.Retries++
		s.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
}

// post sends body as JSON and wants one of the codes.
func post(url string, hdr map[string]string, body any, codes ...int) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	for _, c := range codes {
		if resp.StatusCode == c {
			return nil
		}
	}
	return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, out)
}

// soakAudio is clip i (a 2 s jingle) or episode i (12 s of background
// with clip i%4 in it at 3 s), as a WAV file.
func soakAudio(kind string, i int) []byte {
	const rate = 8000
	if kind == events.KindClip {
		return locatetest.WAV(locatetest.Jingle(uint64(i+1), 2, rate), rate)
	}
	ep := locatetest.Bed(uint64(1000+i), 12, rate)
	locatetest.Insert(ep, locatetest.Jingle(uint64(i%4+1), 2, rate), 3*rate, 0.8)
	return locatetest.WAV(ep, rate)
}

// curate stores a record's audio and posts the record to the curator.
func (s *soak) curate(kind string, i int) {
	id := fmt.Sprintf("%s-%03d", kind, i)
	wav := soakAudio(kind, i)
	key := "audio/" + id + ".wav"
	s.retry("store "+key, func() error {
		_, err := s.bs.Put(context.Background(), key, bytes.NewReader(wav), nil)
		return err
	})
	sum := sha256.Sum256(wav)
	at := time.Date(2026, 11, 1, 0, 0, i, 0, time.UTC)
	rec := map[string]any{"id": id, "title": "Soak " + id, "media": map[string]string{"key": key, "sha256": hex.EncodeToString(sum[:])},
		"duration_ms": 2000, "priority": 0, "initial_curated_at": at, "latest_curated_at": at}
	path := "/v1/clips"
	if kind == events.KindEpisode {
		path, rec["duration_ms"] = "/v1/episodes", 12000
	}
	s.retry("post "+id, func() error {
		return post(s.api["curator"]+path, map[string]string{"Idempotency-Key": "soak-" + id, "Archivist-Producer": "soak"}, rec, http.StatusAccepted)
	})
	s.mu.Lock()
	if kind == events.KindEpisode {
		s.sent.Episodes++
	} else {
		s.sent.Clips++
	}
	s.mu.Unlock()
}

// batch submits a batch manifest of 3 files served by the origin.
func (s *soak) batch(n int) {
	var rows []origin.File
	for i := range 3 {
		name := fmt.Sprintf("b%03d-%d.txt", n, i)
		rows = append(rows, origin.File{Path: "/files/" + name, Name: name, LocalID: fmt.Sprintf("soak-%03d-%d", n, i),
			Body: []byte(fmt.Sprintf("soak batch %d file %d %s", n, i, strings.Repeat("z", 100*i)))})
	}
	manifest := s.files.AddBatch(s.origin.URL, fmt.Sprintf("/manifests/b%03d.checkm", n), rows)
	sub := map[string]string{"submitter": "soak", "profile": "soak", "payload_url": manifest, "type": "batch-manifest"}
	s.retry(fmt.Sprintf("submit batch %d", n), func() error {
		return post(s.api["curator"]+"/v1/batches", map[string]string{"Idempotency-Key": fmt.Sprintf("soak-batch-%03d", n)}, sub,
			http.StatusCreated, http.StatusOK)
	})
	s.mu.Lock()
	s.sent.Batches++
	s.sent.Files += 3
	s.mu.Unlock()
}

// warc drops a WARC file of 5 records, each of a URL of its own host, into
// the repository the indexer scans.
func (s *soak) warc(n int) {
	host := fmt.Sprintf("h%03d.soak.example", n)
	s.retry(fmt.Sprintf("store WARC %d", n), func() error {
		_, err := s.bs.Put(context.Background(), fmt.Sprintf("warcs/soak-%03d.warc.gz", n), bytes.NewReader(warctest.Gzipped(host, 5)), nil)
		return err
	})
	s.mu.Lock()
	s.sent.WARCs++
	s.sent.WARCLines += 5
	s.sent.hosts = append(s.sent.hosts, host)
	s.mu.Unlock()
}

// auditCheck asks the auditor to check every stored object now.
func (s *soak) auditCheck() {
	s.retry("audit check", func() error {
		return post(s.api["auditor"]+"/v1/audit/check", nil, map[string]string{"space": "objects/"}, http.StatusAccepted)
	})
	s.mu.Lock()
	s.sent.AuditChecks++
	s.mu.Unlock()
}

// soakState is what the end found.
type soakState struct {
	results, pairsOpen, failedPairs, leases, parked                   int
	batches, batchesOpen, jobs, jobsOpen, versions                    int
	files, filesOpen, lines, distinct                                 int
	objects, inventoryFiles, checked, unchecked, badChecks, openTasks int
	deadLetters, poisonLetters                                        int
	parkedFiles, parkedAudits, waitingPairs, failedJobs               int
	activeEpisodes, activeClips                                       int
}

// settle waits, up to 5 minutes, until everything sent has been done, then
// reports the counts; it fails the test with what is missing if the system
// never settles.
func (s *soak) settle(start time.Time, d time.Duration) {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, s.sh.DBURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	s.mu.Lock()
	sent := s.sent
	s.mu.Unlock()
	var finalCheck time.Time
	var st soakState
	var problems []string
	settleStart := time.Now()
	lastReport := settleStart
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(2 * time.Second) {
		st, problems = s.observe(ctx, db, sent, finalCheck)
		if finalCheck.IsZero() && st.jobsOpen == 0 && st.jobs == sent.Files && st.objects == st.inventoryFiles && st.objects > 0 {
			// Everything is stored and known to the auditor: one last check
			// of every object, which the end then waits for.
			finalCheck = time.Now()
			s.auditCheck()
			continue
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		if time.Since(lastReport) >= 20*time.Second {
			lastReport = time.Now()
			s.t.Logf("settling for %s, still waiting for: %s", time.Since(settleStart).Round(time.Second), strings.Join(problems, "; "))
		}
	}
	lost := (sent.Episodes*sent.Clips - st.results) + (sent.Files - (st.jobs - st.jobsOpen)) + (sent.WARCLines - st.distinct) + st.unchecked
	duplicated := (st.lines - st.distinct) + max(st.versions-sent.Files, 0) + max(st.results-sent.Episodes*sent.Clips, 0)
	stuck := st.pairsOpen + st.failedPairs + st.leases + st.parked + st.batchesOpen + st.jobsOpen + st.filesOpen
	s.t.Logf("soak %s (settled in %s): %d curation records (%d episodes x %d clips), %d results; %d batches, %d jobs, %d versions; "+
		"%d WARC files, %d lines answered (%d distinct); %d objects, %d checked, %d audit checks asked; %d kills, %d PostgreSQL restarts, "+
		"%d NATS restarts, %d blob store outages, %d client retries; dead letters %d (poison %d); parked %d; lost %d, duplicated %d, stuck %d",
		d, time.Since(settleStart).Round(time.Second), sent.Episodes+sent.Clips, sent.Episodes, sent.Clips, st.results,
		st.batches, st.jobs, st.versions, st.files, st.lines, st.distinct, st.objects, st.checked, sent.AuditChecks+1,
		sent.Kills, sent.PGRestarts, sent.NATSRestarts, sent.BlobOutages, sent.Retries, st.deadLetters, st.poisonLetters,
		st.parked+st.failedPairs+st.parkedFiles+st.parkedAudits, lost, duplicated, stuck)
	for _, p := range problems {
		s.t.Error(p)
	}
	if st.unchecked > 0 || st.badChecks > 0 {
		s.auditTrail(ctx, db, finalCheck)
	}
	if sent.Kills == 0 || sent.PGRestarts != 2 || sent.NATSRestarts != 1 || sent.BlobOutages != 1 || sent.Episodes == 0 || sent.Files == 0 || sent.WARCs == 0 {
		s.t.Errorf("the soak did too little to prove anything: %+v", sent)
	}
	if s.t.Failed() {
		s.dumpLogs()
	}
}

// auditTrail logs, for up to 10 objects not checked since the final audit
// check or whose last check failed, what the auditor's tables say of each,
// in time order: its schedule, its checks (bit log) and its audit-queue
// entries. A red soak then says what happened to the check that never came.
func (s *soak) auditTrail(ctx context.Context, db *pgxpool.Pool, finalCheck time.Time) {
	rows, err := db.Query(ctx, `WITH odd AS (
			SELECT object FROM auditor.schedule WHERE checked_at IS NULL OR checked_at < $1
			UNION SELECT object FROM (SELECT DISTINCT ON (object) object, success FROM auditor.bit_log ORDER BY object, id DESC) l WHERE NOT success
			ORDER BY object LIMIT 10)
		SELECT object, at, what FROM (
			SELECT object, coalesce(checked_at, 'epoch') AS at, format('schedule: queued_for %s, checked_at %s, parked_at %s %s', queued_for, checked_at, parked_at, parked_reason) AS what
				FROM auditor.schedule WHERE object IN (SELECT object FROM odd)
			UNION ALL SELECT object, at, format('check: row %s, success %s, attempt %s, %s', row_no, success, attempt, note)
				FROM auditor.bit_log WHERE object IN (SELECT object FROM odd)
			UNION ALL SELECT object, created_at, format('audit queue: row %s, %s, done %s, outcome %s, failures %s, parked_at %s', row_no, reason, done, outcome, failures, parked_at)
				FROM auditor.audit_queue WHERE object IN (SELECT object FROM odd)
			UNION ALL SELECT object, updated_at, 'content index: '||checksum FROM auditor.content_index WHERE object IN (SELECT object FROM odd)
		) t ORDER BY object, at`, finalCheck)
	if err != nil {
		s.t.Logf("the audit trail: %v", err)
		return
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var object, what string
		var at time.Time
		if err := rows.Scan(&object, &at, &what); err != nil {
			s.t.Logf("the audit trail: %v", err)
			return
		}
		fmt.Fprintf(&b, "\n  %s %s: %s", at.UTC().Format("15:04:05.000"), object, what)
	}
	s.t.Logf("the audit trail of the objects unchecked or failed (the final check asked at %s):%s", finalCheck.UTC().Format("15:04:05.000"), b.String())
}

// observe reads the end state and lists what is not yet as it must be.
func (s *soak) observe(ctx context.Context, db *pgxpool.Pool, sent soakSent, finalCheck time.Time) (st soakState, problems []string) {
	q := func(dst *int, sql string, args ...any) {
		if err := db.QueryRow(ctx, sql, args...).Scan(dst); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", sql, err))
		}
	}
	q(&st.activeEpisodes, `SELECT count(*) FROM research.episodes WHERE active`)
	q(&st.activeClips, `SELECT count(*) FROM research.clips WHERE active`)
	q(&st.results, `SELECT count(*) FROM research.results`)
	q(&st.pairsOpen, `SELECT count(*) FROM research.pairs WHERE state = 'leased'`)
	q(&st.failedPairs, `SELECT count(*) FROM research.pairs WHERE state = 'failed'`)
	q(&st.leases, `SELECT count(*) FROM research.leases WHERE state = 'active'`)
	q(&st.parked, `SELECT count(*) FROM research.episodes WHERE parked_reason IS NOT NULL`)
	q(&st.batches, `SELECT count(*) FROM curator.batches`)
	q(&st.batchesOpen, `SELECT count(*) FROM curator.batches WHERE state <> 'completed'`)
	q(&st.jobs, `SELECT count(*) FROM curator.jobs`)
	q(&st.jobsOpen, `SELECT count(*) FROM curator.jobs WHERE state <> 'completed'`)
	q(&st.versions, `SELECT count(*) FROM curator.inventory_versions`)
	q(&st.inventoryFiles, `SELECT count(*) FROM curator.inventory_files`)
	q(&st.parkedFiles, `SELECT count(*) FROM indexer.files WHERE status IN ('parked', 'failed')`)
	q(&st.parkedAudits, `SELECT count(*) FROM auditor.audit_queue WHERE parked_at IS NOT NULL OR failures > 0`)
	q(&st.waitingPairs, `SELECT count(*) FROM research.pairs WHERE state = 'waiting'`)
	q(&st.failedJobs, `SELECT count(*) FROM curator.jobs WHERE state = 'failed'`)
	q(&st.files, `SELECT count(*) FROM indexer.files`)
	q(&st.filesOpen, `SELECT count(*) FROM indexer.files WHERE status <> 'indexed'`)
	q(&st.objects, `SELECT count(*) FROM auditor.content_index`)
	q(&st.openTasks, `SELECT count(*) FROM auditor.resolution_tasks WHERE state = 'open'`)
	q(&st.checked, `SELECT count(*) FROM auditor.schedule WHERE checked_at >= $1`, finalCheck)
	q(&st.badChecks, `SELECT count(*) FROM (SELECT DISTINCT ON (object) success FROM auditor.bit_log ORDER BY object, id DESC) l WHERE NOT success`)
	st.unchecked = st.objects - st.checked
	st.lines, st.distinct = cdxLines(s.api["aggregator"] + "/cdx?url=soak.example&matchType=domain")
	st.lines, st.distinct = max(st.lines, 0), max(st.distinct, 0)
	st.deadLetters, st.poisonLetters = s.deadLetters(ctx)

	want := func(what string, got, n int) {
		if got != n {
			problems = append(problems, fmt.Sprintf("%s: %d, want %d", what, got, n))
		}
	}
	want("active episodes", st.activeEpisodes, sent.Episodes)
	want("active clips", st.activeClips, sent.Clips)
	want("results stored", st.results, sent.Episodes*sent.Clips)
	want("pairs still leased", st.pairsOpen, 0)
	want("pairs failed", st.failedPairs, 0)
	want("leases still active", st.leases, 0)
	want("episodes parked", st.parked, 0)
	want("pairs waiting after a failure", st.waitingPairs, 0)
	want("jobs failed", st.failedJobs, 0)
	want("WARC files failed or parked", st.parkedFiles, 0)
	want("audit-queue entries failed or parked", st.parkedAudits, 0)
	want("batches", st.batches, sent.Batches)
	want("batches not completed", st.batchesOpen, 0)
	want("jobs", st.jobs, sent.Files)
	want("jobs not completed", st.jobsOpen, 0)
	want("object versions", st.versions, sent.Files)
	want("WARC files known to the indexer", st.files, sent.WARCs)
	want("WARC files not indexed", st.filesOpen, 0)
	want("CDX lines answered", st.lines, sent.WARCLines)
	want("distinct CDX lines answered", st.distinct, sent.WARCLines)
	want("objects known to the auditor", st.objects, st.inventoryFiles)
	if finalCheck.IsZero() {
		problems = append(problems, "the final audit check was never asked (ingest or the auditor's index never caught up)")
	} else {
		want("objects not checked since the final audit check", st.unchecked, 0)
	}
	want("objects whose last check failed", st.badChecks, 0)
	want("open resolution tasks", st.openTasks, 0)
	want("dead letters that are not the poison", st.deadLetters-st.poisonLetters, 0)
	if st.poisonLetters == 0 {
		problems = append(problems, "the poison message was never dead-lettered")
	}
	return st, problems
}

// deadLetters counts the dead letters, and those that are the poison.
func (s *soak) deadLetters(ctx context.Context) (all, poison int) {
	nc, err := nats.Connect(s.sh.NATSURL)
	if err != nil {
		return -1, 0
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		return -1, 0
	}
	info, err := st.Info(ctx)
	if err != nil {
		return -1, 0
	}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return -1, 0
		}
		all++
		if bytes.Equal(m.Data, s.poison) {
			poison++
		} else {
			s.t.Logf("dead letter %d: %s from %s: %s", seq, m.Header.Get(events.HeaderDLQConsumer), m.Header.Get(events.HeaderDLQSubject), m.Header.Get(events.HeaderDLQReason))
		}
	}
	return all, poison
}

// dumpLogs points at PostgreSQL's log when the soak failed.
func (s *soak) dumpLogs() {
	if b, err := os.ReadFile(filepath.Join(s.pg.Dir, "postgres.log")); err == nil && len(b) > 0 {
		tail := b[max(len(b)-4000, 0):]
		s.t.Logf("postgres.log (tail):\n%s", tail)
	}
}
