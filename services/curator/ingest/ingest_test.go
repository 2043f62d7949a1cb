package ingest_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/curator/curator"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// origin is a test HTTP server of files, with faults to inject.
type origin struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	fail  map[string]int // path → how many more requests get a 500
	hang  map[string]chan struct{}
	gets  atomic.Int64
	// served counts the GETs answered with their whole body.
	served atomic.Int64
}

func newOrigin(t testing.TB) *origin {
	o := &origin{files: map[string][]byte{}, fail: map[string]int{}, hang: map[string]chan struct{}{}}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		body, ok := o.files[r.URL.Path]
		if i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/gen/")); !ok && err == nil && strings.HasPrefix(r.URL.Path, "/gen/") {
			body, ok = generated(i), true // made on each request, never held
		}
		fails := o.fail[r.URL.Path]
		if fails > 0 && r.Method == http.MethodGet {
			o.fail[r.URL.Path]--
		}
		hang := o.hang[r.URL.Path]
		o.mu.Unlock()
		if r.Method == http.MethodGet {
			o.gets.Add(1)
		}
		if hang != nil && r.Method == http.MethodGet {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		if fails > 0 && r.Method == http.MethodGet {
			http.Error(w, "injected fault", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		if r.Method == http.MethodGet {
			w.Write(body)
			o.served.Add(1)
		}
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) put(path string, body []byte) string {
	o.mu.Lock()
	o.files[path] = body
	o.mu.Unlock()
	return o.srv.URL + path
}

// manifestHeader opens a checkm batch manifest.
const manifestHeader = "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-batch-manifest\n" +
	"#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:localIdentifier\n"

// generated is the body of the origin's generated file i: 1 KiB.
func generated(i int) []byte {
	b := []byte(fmt.Sprintf("generated file %d ", i))
	for len(b) < 1024 {
		b = append(b, byte('a'+len(b)%26))
	}
	return b
}

// generatedManifest is a checkm batch manifest of n generated files of 1
// KiB (digests declared), the files made by the origin as they are asked
// for: a batch's size costs the origin nothing (manifest's files grow with
// their number, and are held).
func (o *origin) generatedManifest(name string, n int) string {
	var m strings.Builder
	m.WriteString(manifestHeader)
	for i := range n {
		body := generated(i)
		sum := md5.Sum(body)
		fmt.Fprintf(&m, "%s/gen/%d | md5 | %s | %d | | %s-%06d.txt | %s-local-%d\n", o.srv.URL, i, hex.EncodeToString(sum[:]), len(body), name, i, name, i)
	}
	m.WriteString("#%eof\n")
	return o.put("/manifests/"+name+".checkm", []byte(m.String()))
}

// manifest is a checkm batch manifest of n files (digests declared) served
// by o; it returns its URL and the files' contents by name.
func (o *origin) manifest(name string, n int) (string, map[string][]byte) {
	var m strings.Builder
	m.WriteString(manifestHeader)
	files := map[string][]byte{}
	for i := range n {
		body := []byte(fmt.Sprintf("%s file %d: %s", name, i, strings.Repeat("x", i*37)))
		fname := fmt.Sprintf("%s-%03d.txt", name, i)
		u := o.put("/files/"+fname, body)
		sum := md5.Sum(body)
		fmt.Fprintf(&m, "%s | md5 | %s | %d | | %s | %s-local-%d\n", u, hex.EncodeToString(sum[:]), len(body), fname, name, i)
		files[fname] = body
	}
	m.WriteString("#%eof\n")
	return o.put("/manifests/"+name+".checkm", []byte(m.String())), files
}

type rig struct {
	t        testing.TB
	api      string
	db       *pgxpool.Pool
	bs       blob.Store
	shared   testenv.Shared
	env      map[string]string
	callback atomic.Int64 // job callbacks
	reports  atomic.Int64 // batch reports sent to the callback
	cbURL    string
	svc      *testenv.Service
}

func newRig(t testing.TB, extra map[string]string) *rig {
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newRigWith(t, local, extra)
}

func newRigWith(t testing.TB, bs blob.Store, extra map[string]string) *rig {
	var err error
	r := &rig{t: t, bs: bs}
	r.shared = testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs}
	port := testenv.FreePort(t)
	r.api = fmt.Sprintf("http://127.0.0.1:%d", port)
	r.env = map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "INGEST_ALLOW_PRIVATE": "true",
		"INGEST_INTERVAL": "100ms", "INGEST_MIN_FREE_BYTES": "1048576", "INGEST_WORK_DIR": t.TempDir(), "INGEST_RETRIES": "2",
		// Failed attempts are bounded by number alone here (not by time):
		// TestOriginDownForLongerThanItsAttempts runs with a budget.
		"INGEST_RETRY_BUDGET": "0s", "INGEST_RETRY_MAX": "1s"}
	for k, v := range extra {
		r.env[k] = v
	}
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct{ Type string }
		json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&body)
		if body.Type == "batch-report" {
			r.reports.Add(1)
		} else {
			r.callback.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(cb.Close)
	r.cbURL = cb.URL
	r.svc = testenv.StartServiceIn(t, curator.Definition(), r.shared, r.env)
	r.db, err = store.Open(context.Background(), store.Config{URL: r.shared.DBURL, MaxConns: 4}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.db.Close)
	return r
}

func (r *rig) call(method, path string, body any) (int, map[string]any) {
	r.t.Helper()
	return r.callWith(method, path, body, nil)
}

// callWith is call with request headers.
func (r *rig) callWith(method, path string, body any, hdr map[string]string) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.api+path, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (r *rig) submit(sub ingest.Submission) int64 {
	r.t.Helper()
	code, out := r.call("POST", "/v1/batches", sub)
	if code != http.StatusCreated {
		r.t.Fatalf("submit: %d %v", code, out)
	}
	return int64(out["batch"].(float64))
}

func (r *rig) state(e ingest.Entity, id int64) ingest.State {
	var s ingest.State
	q := "SELECT state FROM curator.batches WHERE id = $1"
	if e == ingest.Job {
		q = "SELECT state FROM curator.jobs WHERE id = $1"
	}
	r.db.QueryRow(context.Background(), q, id).Scan(&s)
	return s
}

func (r *rig) waitState(e ingest.Entity, id int64, want ingest.State, timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := r.state(e, id)
		if s == want {
			return
		}
		if time.Now().After(deadline) {
			var msg string
			r.db.QueryRow(context.Background(), "SELECT error FROM curator."+string(e)+"es WHERE id = $1", id).Scan(&msg)
			r.t.Fatalf("%s %d is %s (%s), want %s", e, id, s, msg, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// jobsOf lists a batch's job ids.
func (r *rig) jobsOf(batch int64) []int64 {
	rows, _ := r.db.Query(context.Background(), "SELECT id FROM curator.jobs WHERE batch_id = $1 ORDER BY id", batch)
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

// TestManifestOf100FilesEndToEnd: a batch manifest of 100 files served by
// a local HTTP server is submitted, each file becomes a job that is
// estimated, downloaded (md5 checked), processed (one ARK each), stored,
// recorded (inventory and archive.object.recorded), notified (callback) and
// reported; the blob store and the inventory hold every file with its
// sha256.
func TestManifestOf100FilesEndToEnd(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	murl, files := o.manifest("e2e", 100)
	id := r.submit(ingest.Submission{Submitter: "tester", Profile: "podcasts", PayloadURL: murl, Type: "batch-manifest",
		Title: "E2E", Creator: "Archivist", CallbackURL: r.cbURL})
	r.waitState(ingest.Batch, id, ingest.Completed, 60*time.Second)

	if n := r.callback.Load(); n != 100 {
		t.Errorf("%d callbacks, want 100", n)
	}
	if n := r.reports.Load(); n != 1 {
		t.Errorf("%d batch reports sent, want 1", n)
	}
	rows, err := r.db.Query(context.Background(), `SELECT f.path, f.key, f.size, f.sha256, o.local_id FROM curator.inventory_files f
		JOIN curator.inventory_objects o ON o.ark = f.ark WHERE f.path LIKE 'producer/%'`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var path, key, sha, local string
		var size int64
		rows.Scan(&path, &key, &size, &sha, &local)
		name := strings.TrimPrefix(path, "producer/")
		body, ok := files[name]
		sum := sha256.Sum256(body)
		if !ok || size != int64(len(body)) || sha != hex.EncodeToString(sum[:]) {
			t.Errorf("inventory %s: size %d sha %s", path, size, sha)
		}
		rc, info, err := r.bs.Get(context.Background(), key)
		if err != nil {
			t.Errorf("blob %s: %v", key, err)
			continue
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, body) || info.Size != int64(len(body)) {
			t.Errorf("blob %s differs from what was served", key)
		}
		seen++
	}
	rows.Close()
	if seen != 100 {
		t.Errorf("%d producer files in the inventory, want 100", seen)
	}
	var arks, objects int
	r.db.QueryRow(context.Background(), "SELECT count(*) FROM curator.arks").Scan(&arks)
	r.db.QueryRow(context.Background(), "SELECT count(*) FROM curator.inventory_objects").Scan(&objects)
	if arks != 100 || objects != 100 {
		t.Errorf("%d ARKs and %d objects, want 100 each", arks, objects)
	}
	// Every file and system file was announced once.
	b := testenv.BusAt(t, r.shared.NATSURL, "test")
	info, err := b.JetStream().Stream(context.Background(), events.StreamArchive)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := info.Info(context.Background()); st.State.Msgs != 400 {
		t.Errorf("%d archive.object.recorded messages, want 400 (100 objects x 1 file + 3 system files)", st.State.Msgs)
	}
	// The report.
	code, st := r.call("GET", fmt.Sprintf("/v1/batches/%d", id), nil)
	rep, _ := st["report"].(map[string]any)
	if code != 200 || rep == nil || len(rep["objects"].([]any)) != 100 {
		t.Errorf("batch status %d %v", code, st)
	}
	if rc, _, err := r.bs.Get(context.Background(), fmt.Sprintf("reports/batch-%d.json", id)); err != nil {
		t.Errorf("report blob: %v", err)
	} else {
		rc.Close()
	}
	// A job's history walks the whole machine.
	code, js := r.call("GET", fmt.Sprintf("/v1/jobs/%d", r.jobsOf(id)[0]), nil)
	var path []string
	for _, h := range js["history"].([]any) {
		path = append(path, h.(map[string]any)["to"].(string))
	}
	if code != 200 || strings.Join(path, ",") != "estimating,provisioning,downloading,processing,storing,recording,notify,completed" {
		t.Errorf("job history %v", path)
	}
	_ = bus.Outgoing{}
}
