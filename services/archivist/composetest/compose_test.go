// Package composetest runs compose.yaml end to end on a Docker engine: the
// images of a release of this tree (tools/release, every platform) pushed
// to a local registry and pulled by digest, every health check green, the
// README's flows across containers, a service killed mid-work and
// restarted, then down -v.
//
//	ARCHIVIST_COMPOSE_TEST=1 go test ./services/archivist/composetest/
//
// It needs a Docker engine, docker-compose (or docker compose), Debian's
// docker-registry and /bin/busybox (Debian's busybox-static); .ci/run
// installs them and sets the variable where the engine answers.
package composetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest/origin"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// root is the repository, from this package's directory.
const root = "../../.."

// system is one compose project under test.
type system struct {
	t          *testing.T
	composeBin []string // the compose command
	files      []string // compose.yaml and its overrides
	project    string
	env        []string
	api        map[string]string // service → base URL
	token      string
	log        io.Writer
	start      time.Time
}

// skipUnlessAsked skips, saying how to run it, unless ARCHIVIST_COMPOSE_TEST
// is set.
func skipUnlessAsked(t *testing.T) {
	if os.Getenv("ARCHIVIST_COMPOSE_TEST") == "" {
		testenv.Skip(t, "the compose end-to-end tests run with ARCHIVIST_COMPOSE_TEST=1 (a Docker engine, docker-compose, /bin/busybox)")
	}
	// The images are built from the whole tree by programs go test does not
	// watch, so a cached pass is valid only for the same source: .ci/run
	// names it here (its commit and uncommitted change), and go test keys
	// its cache on the variables a test reads.
	if src := os.Getenv("ARCHIVIST_COMPOSE_SOURCE"); src != "" {
		t.Logf("source %s", src)
	}
}

// TestCompose: compose.yaml end to end (see the package comment).
func TestCompose(t *testing.T) {
	skipUnlessAsked(t)
	t.Parallel() // a compose project and ports of its own
	s := newSystem(t, "single")
	s.up()
	s.researchAndKill("researcher")
	s.ingestAndAudit(true)
	s.indexWARC()
	s.dashboardShowsAll()
}

// TestComposeCluster: the same with a 3-node JetStream cluster
// (deploy/compose/cluster.yaml: every stream and bucket at 3 replicas); a
// NATS node is stopped while an episode waits for research and a batch is
// ingested, and the system goes on.
func TestComposeCluster(t *testing.T) {
	skipUnlessAsked(t)
	t.Parallel()
	s := newSystem(t, "cluster", "deploy/compose/cluster.yaml")
	s.up()
	// Every stream and the researchers' bucket at 3 replicas.
	jsz := strings.Join(strings.Fields(s.compose("exec", "-T", "nats", "wget", "-qO-", "http://localhost:8222/jsz?accounts=true&streams=true&config=true")), "")
	if n := strings.Count(jsz, `"num_replicas":3`); n < 10 || strings.Contains(jsz, `"num_replicas":1,`) {
		t.Fatalf("streams at 3 replicas: %d; jsz %s", n, jsz)
	}
	s.researchAndKill("nats-2")
	s.ingestAndAudit(false)
	s.indexWARC()
	s.compose("start", "nats-2")
	s.waitHealthy(2 * time.Minute)
}

// step logs a step's time.
func (s *system) step(what string, since time.Time) {
	s.t.Logf("%-56s %6.1f s (%.1f s in all)", what, time.Since(since).Seconds(), time.Since(s.start).Seconds())
}

// up builds the images (once) and brings the system up.
func (s *system) up() {
	s.t.Helper()
	t0 := time.Now()
	publish(s.t, s.env)
	s.step("images released, pulled by digest (tools/release)", t0)
	t0 = time.Now()
	s.compose("up", "-d", "--no-build")
	s.waitHealthy(3 * time.Minute)
	s.step("docker compose up, every health check green", t0)
	// The key the keys service made at this first start: no system has
	// another's.
	out, err := s.composeOut("run", "--rm", "--no-deps", "keys", "key", "token", "/etc/archivist/operator")
	if err != nil {
		s.t.Fatalf("the local operator's key: %v\n%s", err, out)
	}
	s.token = strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if !strings.HasPrefix(s.token, "ak_") {
		s.t.Fatalf("the local operator's key: %q", out)
	}
}

// researchAndKill researches an episode and two clips, then stops victim
// (docker compose kill) while the next episode waits for research, starts
// it again, and wants that episode researched: nothing lost.
func (s *system) researchAndKill(victim string) {
	s.t.Helper()
	t0 := time.Now()
	const rate = 8000
	files := map[string][]byte{}
	for i := range 2 {
		files[fmt.Sprintf("audio/clip-%d.wav", i)] = locatetest.WAV(locatetest.Jingle(uint64(i+1), 2, rate), rate)
	}
	episode := func(n, clip int) []byte {
		ep := locatetest.Bed(uint64(100+n), 12, rate)
		locatetest.Insert(ep, locatetest.Jingle(uint64(clip+1), 2, rate), 4*rate, 0.8)
		return locatetest.WAV(ep, rate)
	}
	files["audio/episode-0.wav"] = episode(0, 0)
	files["audio/episode-1.wav"] = episode(1, 1)
	s.putBlobs(files)
	for i := range 2 {
		s.curate("clip", fmt.Sprintf("clip-%d", i), files[fmt.Sprintf("audio/clip-%d.wav", i)], 2000)
	}
	s.curate("episode", "episode-0", files["audio/episode-0.wav"], 12000)
	s.waitResearch(1, 2, 2*time.Minute)
	s.step("an episode and two clips researched", t0)

	t0 = time.Now()
	s.compose("kill", victim)
	s.curate("episode", "episode-1", files["audio/episode-1.wav"], 12000)
	if victim == "researcher" {
		time.Sleep(2 * time.Second)
		s.compose("start", victim)
	}
	s.waitResearch(2, 4, 3*time.Minute)
	s.step(victim+" killed mid-work: the next episode researched", t0)
}

// ingestAndAudit ingests a batch of three files from an origin on this
// machine (killing and restarting the curator meanwhile, if kill) and
// audits the objects stored.
func (s *system) ingestAndAudit(kill bool) {
	s.t.Helper()
	t0 := time.Now()
	origin := s.origin(map[string][]byte{"/a.txt": []byte("alpha"), "/b.txt": []byte("bravo bravo"), "/c.txt": []byte(strings.Repeat("c", 5000))})
	batch := s.submitBatch(origin)
	what := "a batch ingested"
	if kill {
		s.compose("kill", "curator") // mid-batch: its claims die with its process
		s.compose("start", "curator")
		s.waitHealthy(2 * time.Minute)
		what += " (curator killed and restarted)"
	}
	s.waitBatch(batch, 3*time.Minute)
	s.step(what, t0)
	t0 = time.Now()
	s.post("auditor", "/v1/audit/check", map[string]string{"space": "objects/"}, http.StatusAccepted)
	s.waitAudit(2 * time.Minute)
	s.step("its objects audited", t0)
}

// indexWARC drops a WARC into the repository and wants it answered by the
// CDX API.
func (s *system) indexWARC() {
	s.t.Helper()
	t0 := time.Now()
	s.putBlobs(map[string][]byte{"warcs/compose.warc.gz": warctest.Gzipped("compose.example", 3)})
	s.waitCDX("compose.example/p/2", 3*time.Minute)
	s.step("a WARC indexed and answered by the CDX API", t0)
}

// baseEnv is the environment of compose and of the programs that make its
// images: the release's images under the tag compose runs, the stand-ins
// scripts/images builds for the official NATS, PostgreSQL and MinIO
// images (which no registry here serves), and short retry delays (an
// object whose recorded event a lost NATS node delayed is found "added at
// the provider, not yet captured", row 9, and checked again after
// AUDITOR_RETRY_DELAY, 5 min by default: longer than the test waits).
func baseEnv() []string {
	return append(os.Environ(), "ARCHIVIST_TAG=composetest", "NATS_IMAGE=archivist-ci/nats:2", "POSTGRES_IMAGE=archivist-ci/postgres:15",
		"MINIO_IMAGE=archivist-ci/minio:pinned",
		"INGEST_ALLOW_PRIVATE=true", "INDEXER_SCAN_INTERVAL=2s",
		"AUDITOR_RETRY_DELAY=10s", "RESEARCH_RETRY_BASE=5s", "INDEXER_RETRY_BASE=5s")
}

func newSystem(t *testing.T, name string, files ...string) *system {
	s := &system{t: t, project: fmt.Sprintf("archivist%s%d", name, os.Getpid()), api: map[string]string{}, log: io.Discard,
		files: append([]string{"compose.yaml"}, files...), start: time.Now()}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		s.composeBin = []string{"docker-compose"}
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		s.composeBin = []string{"docker", "compose"}
	} else {
		t.Fatal("ARCHIVIST_COMPOSE_TEST is set but neither docker-compose nor docker compose runs")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Fatalf("ARCHIVIST_COMPOSE_TEST is set but the Docker engine does not answer: %v\n%s", err, out)
	}
	s.env = baseEnv()
	for _, svc := range []string{"curator", "pwa", "auditor", "indexer", "aggregator", "dashboard"} {
		port := testenv.FreePort(t)
		s.env = append(s.env, fmt.Sprintf("%s_PORT=%d", strings.ToUpper(svc), port))
		s.api[svc] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.composeOut("logs", "--no-color", "--tail", "40")
			t.Logf("compose logs:\n%s", out)
			// The auditor's whole log: its checks' rows and attempts, and
			// when each object's recorded event reached it (a cluster run
			// once found 12 objects "not yet captured" on their last
			// attempt, and 40 lines did not tell why).
			out, _ = s.composeOut("logs", "--no-color", "auditor")
			t.Logf("the auditor's log:\n%s", out)
			// And where each consumer stood (pending, acknowledged, its
			// leader): whether the events were delivered at all.
			out, _ = s.composeOut("exec", "-T", "nats", "wget", "-qO-", "http://localhost:8222/jsz?accounts=true&streams=true&consumers=true")
			t.Logf("JetStream's consumers:\n%s", out)
		}
		t0 := time.Now()
		s.down()
		t.Logf("%-52s %6.1f s", "docker compose down -v", time.Since(t0).Seconds())
	})
	return s
}

func (s *system) run(cmd *exec.Cmd) string {
	s.t.Helper()
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

func (s *system) composeCmd(args ...string) *exec.Cmd {
	full := append(append([]string{}, s.composeBin[1:]...), "-p", s.project)
	for _, f := range s.files {
		full = append(full, "-f", filepath.Join(root, f))
	}
	full = append(full, args...)
	cmd := exec.Command(s.composeBin[0], full...)
	cmd.Env = s.env
	return cmd
}

func (s *system) compose(args ...string) string {
	s.t.Helper()
	out, err := s.composeOut(args...)
	if err != nil {
		s.t.Fatalf("compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// down removes the system: its containers, volumes and network. Docker
// releases a removed container's network endpoint a moment after the
// container is gone, and removing the network before then fails ("network
// ... has active endpoints", every container already removed): down is
// asked again until the network goes; any other failure fails the test.
func (s *system) down() {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := s.composeOut("down", "-v", "--remove-orphans")
		if err == nil {
			return
		}
		if !strings.Contains(out, "has active endpoints") {
			s.t.Fatalf("compose down -v --remove-orphans: %v\n%s", err, out)
		}
		if time.Now().After(deadline) {
			// Docker (20.10 here) can keep a removed container's endpoint
			// in its own store for good, listing no container on the
			// network: only its restart lets the network go. With every
			// container and volume of the project gone, which is what the
			// test asks of its teardown, the network, named by this run's
			// project, is left (a CI run went red so after every step of
			// the test had passed).
			left, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+s.project).Output()
			if ids := strings.Fields(string(left)); len(ids) > 0 {
				s.t.Fatalf("compose down left containers %v: %v\n%s", ids, err, out)
			}
			vols, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+s.project).Output()
			for _, v := range strings.Fields(string(vols)) {
				if msg, err := exec.Command("docker", "volume", "rm", v).CombinedOutput(); err != nil {
					s.t.Fatalf("docker volume rm %s: %v\n%s", v, err, msg)
				}
			}
			s.t.Logf("compose down: Docker holds an endpoint of a removed container on the project's network; the network is left to Docker:\n%s", out)
			return
		}
		time.Sleep(time.Second)
	}
}

func (s *system) composeOut(args ...string) (string, error) {
	out, err := s.composeCmd(args...).CombinedOutput()
	return string(out), err
}

// container is the id of a service's container.
func (s *system) container(svc string) string {
	s.t.Helper()
	id := strings.TrimSpace(s.compose("ps", "-q", svc))
	if id == "" {
		s.t.Fatalf("no container of %s", svc)
	}
	return id
}

// waitHealthy waits until every long-running container is healthy and the
// migration has finished.
func (s *system) waitHealthy(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+s.project,
			"--format", "{{.Label \"com.docker.compose.service\"}} {{.Status}}").Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var waiting []string
		for _, l := range lines {
			svc, status, _ := strings.Cut(l, " ")
			switch {
			case (svc == "migrate" || svc == "keys" || svc == "buckets") && strings.HasPrefix(status, "Exited (0)"):
			case strings.Contains(status, "(healthy)"):
			default:
				waiting = append(waiting, svc+": "+status)
			}
		}
		if len(lines) >= s.containers() && len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("not healthy after %s: %v", timeout, waiting)
		}
		time.Sleep(time.Second)
	}
}

// containers is how many containers the project runs: its services.
func (s *system) containers() int {
	out, _ := s.composeOut("config", "--services")
	return len(strings.Fields(out))
}

// putBlobs stores files in the archive's bucket (MinIO) as an operator
// would: `archivist blob put` in the CLI's image, on compose's network.
func (s *system) putBlobs(files map[string][]byte) {
	s.t.Helper()
	for key, body := range files {
		cmd := exec.Command("docker", "run", "--rm", "-i", "--network", s.project+"_default",
			"-e", "BLOB_URL=s3://archive/?endpoint=minio:9000&secure=false&path_style=true&region=us-east-1",
			"-e", "S3_ACCESS_KEY_ID=archivist", "-e", "S3_SECRET_ACCESS_KEY=archivist-minio-secret",
			"archivist/archivist:composetest", "blob", "put", key)
		cmd.Stdin = bytes.NewReader(body)
		s.run(cmd)
	}
}

func (s *system) request(method, svc, path string, body any) (int, []byte) {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.api[svc]+path, r)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out
}

// post sends body, retrying for a minute (a service restarting), and wants
// one of codes.
func (s *system) post(svc, path string, body any, codes ...int) []byte {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, out := s.request(http.MethodPost, svc, path, body)
		for _, c := range codes {
			if code == c {
				return out
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("POST %s%s: %d %s", svc, path, code, out)
		}
		time.Sleep(time.Second)
	}
}

// waitFor polls get until done says so.
func (s *system) waitFor(what string, timeout time.Duration, svc, path string, done func(body []byte) bool) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last []byte
	for {
		code, body := s.request(http.MethodGet, svc, path, nil)
		if code == http.StatusOK && done(body) {
			return
		}
		last = body
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not after %s; last answer %s", what, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

func (s *system) curate(kind, id string, media []byte, ms int) {
	s.t.Helper()
	sum := sha256.Sum256(media)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	rec := map[string]any{"id": id, "title": "Compose " + id, "media": map[string]string{"key": "audio/" + id + ".wav", "sha256": hex.EncodeToString(sum[:])},
		"duration_ms": ms, "priority": 0, "initial_curated_at": at, "latest_curated_at": at}
	s.post("curator", "/v1/"+kind+"s", rec, http.StatusAccepted)
}

func (s *system) waitResearch(episodes, results int, timeout time.Duration) {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("%d episodes complete with %d results", episodes, results), timeout, "pwa", "/v1/research/status", func(b []byte) bool {
		var st struct {
			Episodes struct {
				Complete int `json:"complete"`
			} `json:"episodes"`
			Results int `json:"results"`
		}
		return json.Unmarshal(b, &st) == nil && st.Episodes.Complete == episodes && st.Results == results
	})
}

// origin serves files on every address of this machine with their batch
// manifest, and returns the URL at which the containers reach it (the
// compose network's gateway).
func (s *system) origin(files map[string][]byte) string {
	s.t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		s.t.Fatal(err)
	}
	o := origin.New(nil)
	srv := &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	s.t.Cleanup(func() { srv.Close() })
	gw := strings.TrimSpace(s.run(exec.Command("docker", "network", "inspect", s.project+"_default", "-f", "{{(index .IPAM.Config 0).Gateway}}")))
	base := fmt.Sprintf("http://%s:%d", gw, ln.Addr().(*net.TCPAddr).Port)
	var rows []origin.File
	for path, body := range files {
		rows = append(rows, origin.File{Path: path, Name: strings.TrimPrefix(path, "/"), LocalID: "compose" + strings.ReplaceAll(path, "/", "-"), Body: body})
	}
	o.AddBatch(base, "/batch.checkm", rows)
	return base
}

func (s *system) submitBatch(origin string) int64 {
	s.t.Helper()
	out := s.post("curator", "/v1/batches", map[string]string{"submitter": "compose", "profile": "compose",
		"payload_url": origin + "/batch.checkm", "type": "batch-manifest"}, http.StatusCreated, http.StatusOK)
	var b struct {
		ID int64 `json:"batch"`
	}
	if err := json.Unmarshal(out, &b); err != nil || b.ID == 0 {
		s.t.Fatalf("batch submission answered %s", out)
	}
	return b.ID
}

func (s *system) waitBatch(id int64, timeout time.Duration) {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("batch %d completed", id), timeout, "curator", fmt.Sprintf("/v1/batches/%d", id), func(b []byte) bool {
		var st struct {
			State string `json:"state"`
		}
		if json.Unmarshal(b, &st) == nil && st.State == "failed" {
			s.t.Fatalf("batch %d failed: %s", id, b)
		}
		return st.State == "completed"
	})
}

func (s *system) waitAudit(timeout time.Duration) {
	s.t.Helper()
	s.waitFor("every stored object audited", timeout, "auditor", "/v1/audit/status", func(b []byte) bool {
		var st struct {
			Objects int            `json:"objects"`
			Checked int            `json:"checked_this_cycle"`
			Fails   map[string]int `json:"failures_by_row"`
		}
		// The three files and the system files of their object versions.
		return json.Unmarshal(b, &st) == nil && st.Objects >= 3 && st.Checked >= st.Objects && len(st.Fails) == 0
	})
}

// dashboardShowsAll wants the dashboard's panels, read as the compose
// key's holder, to show every pipeline (no service refused or missing) with
// what the flows above did.
func (s *system) dashboardShowsAll() {
	s.t.Helper()
	t0 := time.Now()
	s.waitFor("the dashboard showing every pipeline", time.Minute, "dashboard", "/panels", func(b []byte) bool {
		page := string(b)
		return !strings.Contains(page, `class="err"`) && strings.Contains(page, `id="research-complete">2<`) &&
			strings.Contains(page, `id="ingest-batches-completed">1<`) && strings.Contains(page, `id="index-indexed">1<`)
	})
	s.step("the dashboard shows every pipeline", t0)
}

func (s *system) waitCDX(url string, timeout time.Duration) {
	s.t.Helper()
	s.waitFor("the CDX API answering "+url, timeout, "aggregator", "/cdx?url="+url, func(b []byte) bool {
		return strings.Contains(string(b), "compose.example")
	})
}
