package ingest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/curator/ingest/container"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// Config is the ingest daemons' configuration.
type Config struct {
	// WorkDir is the working area downloads go to (default: archivist-ingest
	// in the system's temporary directory).
	WorkDir string `env:"INGEST_WORK_DIR"`
	// MinFreeBytes is the free space provisioning keeps in the working area.
	MinFreeBytes int64 `env:"INGEST_MIN_FREE_BYTES, default=1073741824"`
	// LargeJobBytes makes estimating lower a job's priority (5 to 10).
	LargeJobBytes int64 `env:"INGEST_LARGE_JOB_BYTES, default=10737418240"`
	// MaxFileBytes refuses larger files.
	MaxFileBytes int64 `env:"INGEST_MAX_FILE_BYTES, default=107374182400"`
	// AllowedHosts, when set, are the only payload hosts (comma-separated).
	AllowedHosts string `env:"INGEST_ALLOWED_HOSTS"`
	// AllowPrivate allows loopback and private addresses (dev, tests).
	AllowPrivate bool `env:"INGEST_ALLOW_PRIVATE, default=false"`
	// Concurrency is how many jobs each state's daemon works at once.
	Concurrency int `env:"INGEST_CONCURRENCY, default=8"`
	// MaxClaims is how many batches and jobs the process holds claimed at
	// once over all states, each claim holding a PostgreSQL connection,
	// besides one more for each of the 11 states, its own, taken when none
	// of these is free (so no state starves another).
	MaxClaims int `env:"INGEST_MAX_CLAIMS, default=16"`
	// Interval is how long a daemon with nothing to do waits before looking
	// again (provisioning's sleep between passes).
	Interval time.Duration `env:"INGEST_INTERVAL, default=2s"`
	// ResponseTimeout bounds the wait for a response's headers.
	ResponseTimeout time.Duration `env:"INGEST_RESPONSE_TIMEOUT, default=30s"`
	// IdleTimeout fails a download or manifest whose body stalls this long.
	IdleTimeout time.Duration `env:"INGEST_IDLE_TIMEOUT, default=60s"`
	// RequestTimeout bounds a whole HEAD request or callback.
	RequestTimeout time.Duration `env:"INGEST_REQUEST_TIMEOUT, default=1m"`
	// StepTimeout bounds one attempt at any state's work (a download
	// trickled byte by byte, which the idle timeout never ends, included):
	// beyond it the attempt fails and is tried again after a backoff.
	StepTimeout time.Duration `env:"INGEST_STEP_TIMEOUT, default=6h"`
	// EstimateTimeout bounds estimating a job's size (its HEAD requests,
	// several at once): sizes not known by then are left unknown, and
	// downloading checks the working area's room as their bytes arrive.
	EstimateTimeout time.Duration `env:"INGEST_ESTIMATE_TIMEOUT, default=10m"`
	// JobTimeout fails a batch or job whose workers have worked on it this
	// long over all its attempts and states (waits, backoffs and outages
	// not counted); 0: no bound.
	JobTimeout time.Duration `env:"INGEST_JOB_TIMEOUT, default=48h"`
	// HTTPProxy, if set, is the proxy every outgoing request goes through
	// (environment proxies are ignored); the proxy must then enforce the
	// address rules the dial guard enforces without one.
	HTTPProxy string `env:"INGEST_HTTP_PROXY"`
	// MaxManifestBytes bounds one manifest (after transfer decompression).
	MaxManifestBytes int64 `env:"INGEST_MAX_MANIFEST_BYTES, default=16777216"`
	// MaxManifestRows bounds the rows of one manifest, so the jobs of a
	// batch manifest and the files of an object manifest.
	MaxManifestRows int `env:"INGEST_MAX_MANIFEST_ROWS, default=100000"`
	// MaxBatchFiles bounds the files of all the jobs of one batch.
	MaxBatchFiles int `env:"INGEST_MAX_BATCH_FILES, default=200000"`
	// MaxZipEntries bounds the entries of a container.
	MaxZipEntries int `env:"INGEST_MAX_ZIP_ENTRIES, default=10000"`
	// MaxZipRatio bounds how many times larger a container's content is
	// than the container (beyond 16 MiB of content).
	MaxZipRatio int64 `env:"INGEST_MAX_ZIP_RATIO, default=100"`
	// Retries is how many times a download or callback is tried.
	Retries int `env:"INGEST_RETRIES, default=3"`
	// MaxAttempts fails a batch or job after this many claims at one state
	// without moving on (failed attempts, or workers that crashed or hung
	// on it), where the transition table lets the daemon fail it.
	MaxAttempts int `env:"INGEST_MAX_ATTEMPTS, default=5"`
	// RetryMax caps the wait after a failed attempt (the first waits
	// INGEST_INTERVAL, each further one twice as long).
	RetryMax time.Duration `env:"INGEST_RETRY_MAX, default=10m"`
	// RetryBudget is how long a batch's or job's attempts at one state may
	// keep failing for a cause that may pass (an origin or a callback
	// down, the store refusing) before it is failed, once it has also had
	// INGEST_MAX_ATTEMPTS attempts. An outage of PostgreSQL, NATS or the
	// blob store spends nothing: the daemons pause.
	RetryBudget time.Duration `env:"INGEST_RETRY_BUDGET, default=24h"`
	// Retention is how long a completed batch (and its jobs) is kept
	// before the automatic cleanup deletes it (Batch: Completed →
	// Deleted); 0 keeps every batch until an operator cleans up.
	Retention time.Duration `env:"INGEST_RETENTION, default=720h"`
	// TidyInterval is how often the working area is tidied (the
	// directories of jobs that ended, or need none, removed) and batches
	// past INGEST_RETENTION cleaned up; provisioning that finds no room
	// tidies at once.
	TidyInterval time.Duration `env:"INGEST_TIDY_INTERVAL, default=1m"`
	// ARKPrefix is the local minter's shoulder.
	ARKPrefix string `env:"INGEST_ARK_PREFIX, default=ark:/99999/fk4"`
}

// SetGate has every daemon wait while gate is closed (a dependency down)
// and tell an outage from a failure of the batch or job.
func (g *Ingester) SetGate(gate *fault.Gate) {
	g.gate = gate
	g.daemons.SetGate(gate)
}

// Ingester runs the daemons.
type Ingester struct {
	cfg     Config
	store   *Store
	blob    blob.Store
	bus     *bus.Bus
	log     *slog.Logger
	client  *http.Client
	daemons *Set
	// gate pauses the tidying while a dependency is down (nil: never).
	gate *fault.Gate
	// tidying is set while a tidy asked for by provisioning runs.
	tidying atomic.Bool

	// batchMu guards batches, a cache of the batch rows jobs read at
	// several steps (what a job reads of its batch never changes).
	batchMu sync.Mutex
	batches map[int64]*batchRow

	// resv is provisioning's view of the working area's reserved bytes.
	resv struct {
		mu  sync.Mutex
		at  time.Time
		sum int64
	}
}

// New prepares the daemons.
func New(cfg Config, s *Store, bs blob.Store, b *bus.Bus, log *slog.Logger) (*Ingester, error) {
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(os.TempDir(), "archivist-ingest")
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("ingest work dir: %w", err)
	}
	g := &Ingester{cfg: cfg, store: s, blob: bs, bus: b, log: log}
	// Every connection's address is checked when it is made (after DNS,
	// so a name that resolves to a private address is refused too) against
	// IANA's special-purpose registries, IPv4 forms embedded in IPv6
	// included: code.dny.dev/ssrf.
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = DialGuard
	}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          128,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.ResponseTimeout,
		ExpectContinueTimeout: time.Second,
	}
	if cfg.HTTPProxy != "" {
		pu, err := url.Parse(cfg.HTTPProxy)
		if err != nil || pu.Host == "" {
			return nil, fmt.Errorf("INGEST_HTTP_PROXY %q is not a URL", cfg.HTTPProxy)
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	g.client = &http.Client{Transport: tr, Timeout: 0, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return g.allowedURL(r.URL.String())
	}}
	d, err := NewSet(s, SetConfig{Interval: cfg.Interval, RetryMax: cfg.RetryMax, RetryBudget: cfg.RetryBudget,
		MaxAttempts: cfg.MaxAttempts, Concurrency: cfg.Concurrency, MaxClaims: cfg.MaxClaims, StepTimeout: cfg.StepTimeout, JobTimeout: cfg.JobTimeout}, log)
	if err != nil {
		return nil, err
	}
	g.daemons = d
	d.Add(Batch, Pending, onBatch(g.batchPending))
	d.Add(Batch, Reporting, g.batchReport(Reporting))
	d.Add(Batch, UpdateReporting, g.batchReport(UpdateReporting))
	d.Add(Job, Pending, g.onJob(g.jobPending))
	d.Add(Job, Estimating, g.onJob(g.estimate))
	d.Add(Job, Provisioning, g.onJob(g.provision))
	d.Add(Job, Downloading, g.onJob(g.download))
	d.Add(Job, Processing, g.onJob(g.process))
	d.Add(Job, Storing, g.onJob(g.storeFiles))
	d.Add(Job, Recording, g.onJob(g.record))
	d.Add(Job, Notify, g.onJob(g.notify))
	return g, nil
}

// onBatch makes a batch step a Work.
func onBatch(step func(ctx context.Context, id int64) (Outcome, error)) Work {
	return func(ctx context.Context, c *Claim) (Outcome, error) { return step(ctx, c.ID) }
}

// onJob makes a job step a Work: it starts from the job as the claim's
// last move left it, or reads it.
func (g *Ingester) onJob(step func(ctx context.Context, j *JobRow) (Outcome, error)) Work {
	return func(ctx context.Context, c *Claim) (Outcome, error) {
		j := c.Job()
		if j == nil {
			var err error
			if j, err = g.store.Job(ctx, c.ID); err != nil {
				return Outcome{}, err
			}
		}
		return step(ctx, j)
	}
}

// Run runs every daemon, and the sweep for batches done processing, until
// ctx ends; work in hand finishes first.
func (g *Ingester) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() { g.daemons.Run(ctx); done <- struct{}{} }()
	go func() { service.Every(g.cfg.Interval, g.sweep)(ctx); done <- struct{}{} }()
	go func() { service.Every(g.cfg.TidyInterval, g.tidyLoop)(ctx); done <- struct{}{} }()
	for range 3 {
		<-done
	}
}

// sweep reports the batches whose last job's worker died between the
// job's end and the check of its batch (Store.ReportDone).
func (g *Ingester) sweep(ctx context.Context) {
	n, err := g.store.ReportDone(ctx)
	if err != nil && ctx.Err() == nil {
		g.log.Error("ingest: sweep for batches done processing", "err", err)
	}
	if n > 0 {
		g.log.Info("ingest: batches found done processing", "batches", n)
	}
}

// tidyLoop tidies the working area and cleans up batches past their
// retention, logging what it did.
func (g *Ingester) tidyLoop(ctx context.Context) {
	if g.gate.Wait(ctx) != nil {
		return
	}
	if n, err := g.Tidy(ctx); err != nil && ctx.Err() == nil {
		g.log.Error("ingest: tidy the working area", "dir", g.cfg.WorkDir, "err", err)
	} else if n > 0 {
		g.log.Info("ingest: working directories removed", "jobs", n, "dir", g.cfg.WorkDir)
	}
	if g.cfg.Retention <= 0 {
		return
	}
	if n, err := g.store.Cleanup(ctx, g.cfg.Retention); err != nil && ctx.Err() == nil {
		g.log.Error("ingest: clean up batches past their retention", "retention", g.cfg.Retention, "err", err)
	} else if n > 0 {
		g.log.Info("ingest: batches past their retention cleaned up", "batches", n, "retention", g.cfg.Retention)
	}
}

// activeDirStates are the job states whose working directory holds what
// the job still needs: the payload being downloaded, processed or stored.
var activeDirStates = []State{Downloading, Processing, Storing}

// Tidy removes the working directory of every job that needs none any
// more: ended (completed, failed or deleted), past storing, or gone from
// the table. A failed job whose requeue would have needed the payload
// (after downloading or processing) is set to restart from downloading, so
// a requeue fetches it again. The cost is the working area's directories
// (the jobs in flight), not the archive's jobs. It returns how many
// directories it removed.
func (g *Ingester) Tidy(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(g.cfg.WorkDir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", g.cfg.WorkDir, err)
	}
	var ids []int64
	for _, e := range entries {
		var id int64
		if _, err := fmt.Sscanf(e.Name(), "job-%d", &id); err == nil && e.Name() == fmt.Sprintf("job-%d", id) {
			ids = append(ids, id)
		}
	}
	removed := 0
	for chunk := range slices.Chunk(ids, 1000) {
		rows, err := g.store.db.Query(ctx, `WITH idle AS (
				SELECT id FROM unnest($1::bigint[]) AS id
				EXCEPT SELECT id FROM curator.jobs WHERE id = ANY($1) AND state = ANY($2)),
			restart AS (UPDATE curator.jobs SET last_successful = 'provisioning'
				WHERE id IN (SELECT id FROM idle) AND state = 'failed' AND last_successful IN ('downloading', 'processing'))
			SELECT id FROM idle`, chunk, activeDirStates)
		if err != nil {
			return removed, err
		}
		idle, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return removed, err
		}
		for _, id := range idle {
			if err := os.RemoveAll(g.jobDir(id)); err != nil {
				g.log.Warn("ingest: remove a working directory", "job", id, "err", err)
				continue
			}
			removed++
		}
	}
	return removed, nil
}

// Close releases the claims' connections (Run does it when it ends).
func (g *Ingester) Close() { g.daemons.Close() }

// DialGuard refuses, before a connection is made, every address that is
// not a public unicast one (loopback, private, shared, link-local,
// benchmarking, reserved, documentation, multicast, NAT64, 6to4, Teredo,
// IPv4-mapped and -compatible forms of those...), from IANA's
// special-purpose address registries, for any port. It is the ingest
// client's net.Dialer Control unless INGEST_ALLOW_PRIVATE.
var DialGuard = ssrf.New(ssrf.WithAnyPort()).Safe

// do sends req: its response must start within INGEST_RESPONSE_TIMEOUT
// (the transport's bound), and its body fails once no byte has come for
// INGEST_IDLE_TIMEOUT, so a silent origin server holds a worker for a
// bounded time.
func (g *Ingester) do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := g.client.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = newIdleBody(resp.Body, g.cfg.IdleTimeout, cancel)
	return resp, nil
}

// idleBody cancels its request when one Read waits longer than d.
type idleBody struct {
	rc     io.ReadCloser
	d      time.Duration
	t      *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func newIdleBody(rc io.ReadCloser, d time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{rc: rc, d: d, cancel: cancel}
	if d > 0 {
		b.t = time.AfterFunc(time.Hour, func() { b.fired.Store(true); cancel() })
		b.t.Stop()
	}
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.t == nil {
		return b.rc.Read(p)
	}
	b.t.Reset(b.d)
	n, err := b.rc.Read(p)
	b.t.Stop()
	if err != nil && b.fired.Load() {
		err = fmt.Errorf("no data for %s (INGEST_IDLE_TIMEOUT): %w", b.d, err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	if b.t != nil {
		b.t.Stop()
	}
	err := b.rc.Close()
	b.cancel()
	return err
}

func (g *Ingester) allowedURL(s string) error {
	if err := manifest.CheckURL(s); err != nil {
		return err
	}
	if g.cfg.AllowedHosts == "" {
		return nil
	}
	u, _ := url.Parse(s)
	for _, h := range strings.Split(g.cfg.AllowedHosts, ",") {
		if strings.EqualFold(strings.TrimSpace(h), u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("host %s is not in INGEST_ALLOWED_HOSTS", u.Hostname())
}

func (g *Ingester) jobDir(id int64) string {
	return filepath.Join(g.cfg.WorkDir, fmt.Sprintf("job-%d", id))
}

type batchRow struct {
	ID                                                             int64
	Submitter, Profile, PayloadURL, Type, Title, Creator, Date, CB string
}

// batch reads a batch's submission (cached: it never changes).
func (g *Ingester) batch(ctx context.Context, id int64) (*batchRow, error) {
	g.batchMu.Lock()
	b, ok := g.batches[id]
	g.batchMu.Unlock()
	if ok {
		return b, nil
	}
	b = &batchRow{}
	if err := g.store.db.QueryRow(ctx, `SELECT id, submitter, profile, payload_url, type, title, creator, date, callback_url
		FROM curator.batches WHERE id = $1`, id).Scan(&b.ID, &b.Submitter, &b.Profile, &b.PayloadURL, &b.Type, &b.Title, &b.Creator, &b.Date, &b.CB); err != nil {
		return nil, fmt.Errorf("batch %d: %w", id, err)
	}
	g.batchMu.Lock()
	if g.batches == nil || len(g.batches) >= 256 {
		g.batches = map[int64]*batchRow{}
	}
	g.batches[id] = b
	g.batchMu.Unlock()
	return b, nil
}

// openManifest opens a manifest's body for streaming.
func (g *Ingester) openManifest(ctx context.Context, u string) (io.ReadCloser, error) {
	if err := g.allowedURL(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp.Body, nil
}

// scanManifest streams the manifest at u through manifest.ScanCheckm within the
// configured bounds; object says its rows are one object's files (their
// names distinct), not objects of their own. A manifest that cannot be read
// is a *manifestError saying so; one that breaks a bound or is malformed
// says why.
func (g *Ingester) scanManifest(ctx context.Context, u string, object bool, fn func(manifest.Row) error) error {
	body, err := g.openManifest(ctx, u)
	if err != nil {
		return &manifestError{"reading", err}
	}
	defer body.Close()
	lim := manifest.Limits{MaxBytes: g.cfg.MaxManifestBytes, MaxRows: g.cfg.MaxManifestRows, MaxLine: manifest.DefaultLimits.MaxLine, Object: object}
	if err := manifest.ScanCheckm(body, lim, fn); err != nil {
		return &manifestError{"corrupt", err}
	}
	return nil
}

type manifestError struct {
	what string
	err  error
}

func (e *manifestError) Error() string { return e.err.Error() }

func (e *manifestError) Unwrap() error { return e.err }

// newJob is a job to create.
type newJob struct {
	kind, url, localID, title string
	files                     []File
}

// batchPending: a held collection holds the batch; else the payload is
// read and one job per object created, in the transition's transaction.
func (g *Ingester) batchPending(ctx context.Context, id int64) (Outcome, error) {
	b, err := g.batch(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	if held, err := g.store.Held(ctx, b.Profile); err != nil {
		return Outcome{}, err
	} else if held {
		return Outcome{To: Held, Detail: "collection " + b.Profile + " is held"}, nil
	}
	var jobs []newJob
	files := 0
	count := func(n int) error {
		if files += n; files > g.cfg.MaxBatchFiles {
			return fmt.Errorf("the batch lists more than %d files (INGEST_MAX_BATCH_FILES)", g.cfg.MaxBatchFiles)
		}
		return nil
	}
	fail := func(err error, manifest string) (Outcome, error) {
		var me *manifestError
		if errors.As(err, &me) && me.what == "reading" {
			return Outcome{To: Failed, Detail: "reading " + manifest + ": " + err.Error()}, nil
		}
		return Outcome{To: Failed, Detail: "corrupt " + manifest + ": " + err.Error()}, nil
	}
	switch b.Type {
	case "file":
		jobs = []newJob{{kind: "file", url: b.PayloadURL, title: b.Title, files: []File{{URL: b.PayloadURL, Name: nameOf(b.PayloadURL)}}}}
	case "container":
		jobs = []newJob{{kind: "container", url: b.PayloadURL, title: b.Title}}
	case "manifest":
		j := newJob{kind: "manifest", url: b.PayloadURL, title: b.Title}
		err := g.scanManifest(ctx, b.PayloadURL, true, func(r manifest.Row) error {
			j.files = append(j.files, File{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size})
			if r.LocalID != "" {
				j.localID = r.LocalID
			}
			return count(1)
		})
		if err != nil {
			return fail(err, "the manifest")
		}
		jobs = []newJob{j}
	case "batch-manifest":
		// A job a row: the manifest is checked whole first, holding
		// nothing but counts, then streamed again straight into the jobs
		// table inside the transition's transaction, so a batch of 100,000
		// jobs never sits in memory (a manifest changed in between fails
		// that transaction, and the attempt is made again).
		n := 0
		if err := g.scanManifest(ctx, b.PayloadURL, false, func(manifest.Row) error { n++; return count(1) }); err != nil {
			return fail(err, "the manifest")
		}
		if n == 0 {
			return Outcome{To: Failed, Detail: "the payload lists no object"}, nil
		}
		return Outcome{To: Processing, Detail: fmt.Sprintf("%d jobs", n), Apply: func(ctx context.Context, tx pgx.Tx) error {
			src := &manifestJobs{ctx: ctx, g: g, url: b.PayloadURL, batch: id, submitter: b.Submitter, profile: b.Profile, title: b.Title}
			copied, err := tx.CopyFrom(ctx, pgx.Identifier{"curator", "jobs"}, jobColumnsCopied, src)
			src.close()
			if err == nil && int(copied) != n {
				err = fmt.Errorf("the manifest changed while it was read: %d rows, then %d", n, copied)
			}
			return err
		}}, nil
	case "manifest-of-manifests":
		var subs []manifest.Row
		if err := g.scanManifest(ctx, b.PayloadURL, false, func(r manifest.Row) error { subs = append(subs, r); return nil }); err != nil {
			return fail(err, "the manifest")
		}
		for _, r := range subs {
			j := newJob{kind: "manifest", url: r.URL, localID: r.LocalID, title: firstOf(r.Title, b.Title)}
			err := g.scanManifest(ctx, r.URL, true, func(f manifest.Row) error {
				j.files = append(j.files, File{URL: f.URL, Name: f.Name, DigestAlg: f.DigestAlg, Digest: f.Digest, Size: f.Size})
				return count(1)
			})
			if err != nil {
				return fail(err, "object manifest "+r.URL)
			}
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return Outcome{To: Failed, Detail: "the payload lists no object"}, nil
	}
	return Outcome{To: Processing, Detail: fmt.Sprintf("%d jobs", len(jobs)), Apply: func(ctx context.Context, tx pgx.Tx) error {
		rows := make([][]any, len(jobs))
		for i, j := range jobs {
			files := j.files
			if files == nil {
				files = []File{}
			}
			rows[i] = []any{id, b.Submitter, b.Profile, j.kind, j.url, j.localID, j.title, files}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"curator", "jobs"}, jobColumnsCopied, pgx.CopyFromRows(rows))
		return err
	}}, nil
}

// jobColumnsCopied are the columns a batch's jobs are created with.
var jobColumnsCopied = []string{"batch_id", "submitter", "profile", "kind", "payload_url", "local_id", "title", "files"}

// manifestJobs streams a batch manifest's rows as jobs into COPY (a
// pgx.CopyFromSource): the manifest is read by manifest.ScanCheckm as COPY asks for
// rows, one row in hand at a time.
type manifestJobs struct {
	ctx                 context.Context
	g                   *Ingester
	url, profile, title string
	submitter           string
	batch               int64
	next                func() (manifest.Row, error, bool)
	stop                func()
	row                 manifest.Row
	err                 error
}

func (m *manifestJobs) Next() bool {
	if m.next == nil {
		seq := func(yield func(manifest.Row, error) bool) {
			err := m.g.scanManifest(m.ctx, m.url, false, func(r manifest.Row) error {
				if !yield(r, nil) {
					return errStopped
				}
				return nil
			})
			if err != nil && !errors.Is(err, errStopped) {
				yield(manifest.Row{}, err)
			}
		}
		m.next, m.stop = iter.Pull2(seq)
	}
	r, err, ok := m.next()
	if !ok || err != nil {
		m.err = err
		m.stop()
		return false
	}
	m.row = r
	return true
}

var errStopped = errors.New("stopped")

func (m *manifestJobs) Values() ([]any, error) {
	r := m.row
	return []any{m.batch, m.submitter, m.profile, "file", r.URL, r.LocalID, firstOf(r.Title, m.title),
		[]File{{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size}}}, nil
}

func (m *manifestJobs) Err() error { return m.err }

// close ends the manifest's reading if COPY stopped before its end.
func (m *manifestJobs) close() {
	if m.stop != nil {
		m.stop()
	}
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func nameOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || filepath.Base(p.Path) == "/" || filepath.Base(p.Path) == "." {
		return "payload"
	}
	return filepath.Base(p.Path)
}

func (g *Ingester) jobPending(ctx context.Context, j *JobRow) (Outcome, error) {
	if held, err := g.store.Held(ctx, j.Profile); err != nil {
		return Outcome{}, err
	} else if held {
		return Outcome{To: Held, Detail: "collection " + j.Profile + " is held"}, nil
	}
	if j.Kind != "container" && len(j.Files) == 0 {
		return Outcome{To: Failed, Detail: "the object lists no file"}, nil
	}
	return Outcome{To: Estimating}, nil
}

// estimate HEADs every file for its size. It never fails: a size it cannot
// learn counts 0. A job over LargeJobBytes goes behind the others.
func (g *Ingester) estimate(ctx context.Context, j *JobRow) (Outcome, error) {
	// A declared size is taken (and checked on download); others are asked
	// for with HEAD, several at once, the whole within
	// INGEST_ESTIMATE_TIMEOUT: what is not known by then stays unknown.
	type probe struct {
		url  string
		file int // -1: the container
	}
	var probes []probe
	files := slices.Clone(j.Files)
	var total int64
	if j.Kind == "container" {
		probes = append(probes, probe{j.PayloadURL, -1})
	}
	// A size beyond INGEST_MAX_FILE_BYTES reserves nothing: downloading
	// fails the job for it before a byte is fetched (estimating cannot
	// fail a job: the transition table has no such move).
	oversized, oversizedBytes := 0, int64(0)
	for i, f := range files {
		switch {
		case f.Size > g.cfg.MaxFileBytes:
			oversized++
			oversizedBytes += f.Size
		case f.Size > 0:
			total += f.Size
		case j.Kind != "container":
			probes = append(probes, probe{f.URL, i})
		}
	}
	ectx, cancel := context.WithTimeout(ctx, g.cfg.EstimateTimeout)
	defer cancel()
	sizes := make([]int64, len(probes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, p := range probes {
		if g.allowedURL(p.url) != nil {
			continue // refused at download, with the reason
		}
		select {
		case sem <- struct{}{}:
		case <-ectx.Done():
		}
		if ectx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			hctx, cancel := context.WithTimeout(ectx, g.cfg.RequestTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(hctx, http.MethodHead, p.url, nil)
			if err != nil {
				return
			}
			if resp, err := g.do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && resp.ContentLength > 0 {
					sizes[i] = resp.ContentLength
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return Outcome{}, ctx.Err()
	}
	unknown := 0
	for i, p := range probes {
		size := sizes[i]
		if size <= 0 {
			unknown++
		}
		if p.file >= 0 {
			files[p.file].Reported = size
		}
		if size > g.cfg.MaxFileBytes {
			oversized++
			oversizedBytes += size
			continue
		}
		total += size
	}
	prio := j.Priority
	detail := fmt.Sprintf("%d bytes", total)
	if unknown > 0 {
		detail += fmt.Sprintf(", %d of %d sizes unknown", unknown, len(probes))
		if ectx.Err() != nil {
			detail += " (INGEST_ESTIMATE_TIMEOUT)"
		}
	}
	if oversized > 0 {
		detail += fmt.Sprintf(", %d larger than INGEST_MAX_FILE_BYTES", oversized)
	}
	if total+oversizedBytes > g.cfg.LargeJobBytes && prio < 10 {
		prio = 10
		detail += ", very large: priority 10"
	}
	set := map[string]any{"space_needed": total, "priority": prio}
	if j.Kind != "container" && len(probes) > 0 {
		set["files"] = files
	}
	return Outcome{To: Provisioning, Detail: detail, Set: set}, nil
}

// provision waits until the working area has room for the job.
func (g *Ingester) provision(ctx context.Context, j *JobRow) (Outcome, error) {
	id := j.ID
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.cfg.WorkDir, &st); err != nil {
		return Outcome{}, fmt.Errorf("free space of %s: %w", g.cfg.WorkDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	g.resv.mu.Lock()
	defer g.resv.mu.Unlock()
	if time.Since(g.resv.at) >= reservationTTL {
		if err := g.store.db.QueryRow(ctx, `SELECT coalesce(sum(space_needed), 0) FROM curator.jobs WHERE state IN ('downloading', 'processing')`).Scan(&g.resv.sum); err != nil {
			return Outcome{}, err
		}
		g.resv.at = time.Now()
	}
	if free-g.resv.sum-j.SpaceNeeded < g.cfg.MinFreeBytes {
		g.log.Info("ingest: waiting for room in the working area", "job", id, "free", free, "reserved", g.resv.sum, "needed", j.SpaceNeeded)
		if g.tidying.CompareAndSwap(false, true) {
			go func() {
				defer g.tidying.Store(false)
				if n, err := g.Tidy(context.WithoutCancel(ctx)); err != nil {
					g.log.Warn("ingest: tidy the working area", "err", err)
				} else if n > 0 {
					g.log.Info("ingest: working directories removed to make room", "jobs", n)
				}
			}()
		}
		return Outcome{}, errStay
	}
	// Counted until the sum is read again: what this process lets through
	// meanwhile is reserved at once.
	g.resv.sum += j.SpaceNeeded
	return Outcome{To: Downloading}, nil
}

// reservationTTL is how long provisioning trusts the working area's
// reserved bytes (the sum of space needed by jobs downloading and
// processing) before reading it again, adding what it lets through
// meanwhile: reading it for every job was a statement of 0.5-0.7 ms per
// job over a busy table.
const reservationTTL = 200 * time.Millisecond

func newHash(alg string) hash.Hash {
	switch alg {
	case "md5":
		return md5.New()
	case "sha1", "sha-1":
		return sha1.New()
	case "sha512", "sha-512":
		return sha512.New()
	}
	return sha256.New()
}

// download GETs every file into the job's directory (several at once),
// retrying, and checks declared digests and sizes. A mismatch fails the
// job at once.
func (g *Ingester) download(ctx context.Context, j *JobRow) (Outcome, error) {
	id := j.ID
	dir := filepath.Join(g.jobDir(id), "payload")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Outcome{}, err
	}
	files := j.Files
	if j.Kind == "container" {
		files = []File{{URL: j.PayloadURL, Name: "container.zip", Reported: j.SpaceNeeded}}
		dir = g.jobDir(id)
	}
	errs := make(chan error, len(files))
	sem := make(chan struct{}, 4)
	for i := range files {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- g.fetch(ctx, &files[i], filepath.Join(dir, filepath.FromSlash(files[i].Name)))
		}()
	}
	var failure error
	for range files {
		if err := <-errs; err != nil && failure == nil {
			failure = err
		}
	}
	if failure != nil {
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		if errors.Is(failure, errFenced) {
			return Outcome{}, failure
		}
		// Content that is not what the manifest says, a URL not allowed, a
		// 4xx: the job fails at once. An origin that is down or refusing
		// for now: it is tried again, backing off, within the budget.
		if fault.IsPermanent(failure) {
			return Outcome{To: Failed, Detail: failure.Error()}, nil
		}
		return Outcome{}, failure
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	set := map[string]any{"space_needed": total}
	if j.Kind != "container" {
		set["files"] = files
	}
	return Outcome{To: Processing, Detail: fmt.Sprintf("%d files, %d bytes", len(files), total), Set: set}, nil
}

// fetch downloads one file with retries, filling in its size and sha256.
func (g *Ingester) fetch(ctx context.Context, f *File, dst string) error {
	if err := g.allowedURL(f.URL); err != nil {
		return fault.Permanent(fmt.Errorf("%s: %w", f.Name, err))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	var last error
	for try := range max(g.cfg.Retries, 1) {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try*try) * 200 * time.Millisecond):
			}
		}
		err := g.fetchOnce(ctx, f, dst)
		if errors.Is(err, errFenced) {
			return err
		}
		var bad *badContent
		if errors.As(err, &bad) {
			return fault.Permanent(err) // a wrong digest is not retried: the spec fails the job at once
		}
		if err == nil || fault.IsPermanent(err) {
			return err
		}
		last = err
	}
	return fmt.Errorf("%s: %w (after %d tries)", f.Name, last, max(g.cfg.Retries, 1))
}

// roomCheck, written to beside a download whose size the manifest did not
// declare, checks the working area's free space every 64 MiB once the
// bytes exceed the room reserved for them (what its HEAD reported): below
// INGEST_MIN_FREE_BYTES the download stops (tried again later, once there
// is room), so a file whose size nobody knew, or whose HEAD said less,
// cannot fill the disk the other jobs reserved.
type roomCheck struct {
	dir       string
	min       int64
	name      string
	reserved  int64
	written   int64
	sinceLast int64
}

// roomCheckEvery is how many bytes beyond its reservation a download
// writes between checks of the working area's free space.
const roomCheckEvery = 64 << 20

func (r *roomCheck) Write(p []byte) (int, error) {
	r.written += int64(len(p))
	if r.written <= r.reserved {
		return len(p), nil
	}
	r.sinceLast += int64(len(p))
	if r.sinceLast < roomCheckEvery {
		return len(p), nil
	}
	r.sinceLast = 0
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", r.dir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < r.min {
		return 0, fmt.Errorf("%s stopped after %d bytes (%d reserved for it): the working area has %d bytes free, less than INGEST_MIN_FREE_BYTES (%d); tried again when there is room",
			r.name, r.written, r.reserved, free, r.min)
	}
	return len(p), nil
}

type badContent struct{ msg string }

func (b *badContent) Error() string { return b.msg }

func (g *Ingester) fetchOnce(ctx context.Context, f *File, dst string) error {
	for _, said := range []struct {
		n   int64
		who string
	}{{f.Size, "the manifest says"}, {f.Reported, "its HEAD reported"}} {
		if said.n > g.cfg.MaxFileBytes {
			return &badContent{fmt.Sprintf("%s: %s %d bytes, more than INGEST_MAX_FILE_BYTES (%d)", f.Name, said.who, said.n, g.cfg.MaxFileBytes)}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return err
	}
	resp, err := g.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return originStatus(fmt.Errorf("GET %s: %s", f.URL, resp.Status), resp.StatusCode)
	}
	// Written under a temporary name of its own and renamed into place
	// once whole and checked, while the claim holds: a worker that lost its
	// claim (its session gone with a failover) never writes over what the
	// job's new holder downloads.
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-*")
	if err != nil {
		return err
	}
	tmp := out.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	sum := sha256.New()
	w := []io.Writer{out, sum}
	var declared hash.Hash
	if f.Digest != "" && f.DigestAlg != "" {
		if alg := strings.ReplaceAll(f.DigestAlg, "-", ""); alg == "sha256" {
			declared = sum // one hash serves both
		} else {
			declared = newHash(f.DigestAlg)
			w = append(w, declared)
		}
	}
	// Never more than the manifest's size, nor than INGEST_MAX_FILE_BYTES;
	// and beyond the room reserved for it (what its HEAD reported, or
	// nothing when no size was known) only while the working area keeps
	// INGEST_MIN_FREE_BYTES free, checked as the bytes arrive.
	limit, what := g.cfg.MaxFileBytes, "INGEST_MAX_FILE_BYTES"
	if f.Size > 0 && f.Size < limit {
		limit, what = f.Size, "the manifest's size"
	}
	if resp.ContentLength > limit {
		return &badContent{fmt.Sprintf("%s: the origin announces %d bytes, more than %s (%d)", f.Name, resp.ContentLength, what, limit)}
	}
	if f.Size <= 0 {
		w = append(w, &roomCheck{dir: g.cfg.WorkDir, min: g.cfg.MinFreeBytes, name: f.Name, reserved: max(f.Reported, 0)})
	}
	n, err := teeCopy(io.LimitReader(resp.Body, limit+1), w...)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > limit {
		return &badContent{fmt.Sprintf("%s: more bytes than %s (%d)", f.Name, what, limit)}
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%s: %d bytes of %d", f.Name, n, resp.ContentLength)
	}
	if f.Size > 0 && n != f.Size {
		return &badContent{fmt.Sprintf("%s: %d bytes, the manifest says %d", f.Name, n, f.Size)}
	}
	if declared != nil {
		if got := hex.EncodeToString(declared.Sum(nil)); got != f.Digest {
			return &badContent{fmt.Sprintf("%s: %s digest %s, the manifest says %s", f.Name, f.DigestAlg, got, f.Digest)}
		}
	}
	if err := fenceEach(ctx); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	f.Size, f.SHA256 = n, hex.EncodeToString(sum.Sum(nil))
	ok = true
	return nil
}

// process unpacks a container and mints the object's ARK (once: a restart
// finds it on the job). The ERC and Dublin Core files and the storage
// manifest follow from the job, its files and its batch alone
// (systemFiles): storing and recording make them again rather than keep
// them on disk, where every file costs a create and an unlink.
func (g *Ingester) process(ctx context.Context, j *JobRow) (Outcome, error) {
	id := j.ID
	files := j.Files
	var err error
	if j.Kind == "container" {
		src := filepath.Join(g.jobDir(id), "container.zip")
		lim := container.Limits{MaxBytes: g.cfg.MaxFileBytes, MaxEntries: g.cfg.MaxZipEntries, MaxRatio: g.cfg.MaxZipRatio}
		zr, total, err := container.Open(src, lim)
		if err != nil {
			return Outcome{To: Failed, Detail: "corrupt container: " + err.Error()}, nil
		}
		defer zr.Close()
		if err := g.reserveContent(ctx, j, total); err != nil {
			return Outcome{}, err
		}
		if err := fence(ctx); err != nil {
			return Outcome{}, err
		}
		entries, err := container.Extract(zr, filepath.Join(g.jobDir(id), "payload"))
		if err != nil {
			return Outcome{To: Failed, Detail: "corrupt container: " + err.Error()}, nil
		}
		files = make([]File, len(entries))
		for i, e := range entries {
			files[i] = File{Name: e.Name, Size: e.Size, SHA256: e.SHA256}
		}
	}
	if err := fence(ctx); err != nil {
		return Outcome{}, err
	}
	ark, err := g.mint(ctx, j)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{To: Storing, Detail: ark}
	if j.Kind == "container" {
		out.Set = map[string]any{"files": files}
	}
	return out, nil
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xmlEscapeText(&b, s)
	return b.String()
}

// mint gives the job its object's ARK: the one it has, the one its local
// id was given before, or a new one from the local minter, written to the
// job in the same statement that mints it.
func (g *Ingester) mint(ctx context.Context, j *JobRow) (string, error) {
	if j.ARK != "" {
		return j.ARK, nil
	}
	var ark string
	if j.LocalID != "" {
		if err := g.store.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE submitter = $1 AND profile = $2 AND local_id = $3`, j.Submitter, j.Profile, j.LocalID).Scan(&ark); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("ark of local id %s: %w", j.LocalID, err)
		}
	}
	if ark == "" {
		var n int64
		if err := g.store.db.QueryRow(ctx, `SELECT nextval('curator.ark_seq')`).Scan(&n); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		ark = g.cfg.ARKPrefix + noid(n)
		// Minted and kept on the job by one statement: a crash keeps both or
		// neither (a lost number is a gap, never a second ARK).
		if _, err := g.store.db.Exec(ctx, `WITH a AS (INSERT INTO curator.arks (ark, submitter, profile, local_id, job_id) VALUES ($1, $5, $2, $3, $4) RETURNING ark)
			UPDATE curator.jobs SET ark = a.ark FROM a WHERE id = $4 AND jobs.ark = ''`, ark, j.Profile, j.LocalID, j.ID, j.Submitter); err != nil {
			return "", fmt.Errorf("mint %s: %w", ark, err)
		}
		return ark, nil
	}
	if _, err := g.store.db.Exec(ctx, `UPDATE curator.jobs SET ark = $2 WHERE id = $1 AND ark = ''`, j.ID, ark); err != nil {
		return "", fmt.Errorf("job %d keeps %s: %w", j.ID, ark, err)
	}
	return ark, nil
}

// noid spells n in the NOID alphabet (digits and consonants) with its
// check character.
func noid(n int64) string {
	const xdigits = "0123456789bcdfghjkmnpqrstvwxz"
	var s []byte
	for {
		s = append([]byte{xdigits[n%29]}, s...)
		n /= 29
		if n == 0 {
			break
		}
	}
	for len(s) < 6 {
		s = append([]byte{'0'}, s...)
	}
	sum := 0
	for i, c := range s {
		sum += (i + 1) * strings.IndexByte(xdigits, c)
	}
	return string(s) + string(xdigits[sum%29])
}

// reserveContent reserves room in the working area for a container's
// content before it is extracted: the job's space_needed grows by total
// (provisioning counts it for every job in processing), or, if the room
// is not there beyond INGEST_MIN_FREE_BYTES and what other jobs reserved,
// the job stays in processing for a later pass.
func (g *Ingester) reserveContent(ctx context.Context, j *JobRow, total int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.cfg.WorkDir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", g.cfg.WorkDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	g.resv.mu.Lock()
	defer g.resv.mu.Unlock()
	var others int64
	if err := g.store.db.QueryRow(ctx, `SELECT coalesce(sum(space_needed), 0) FROM curator.jobs
		WHERE state IN ('downloading', 'processing') AND id <> $1`, j.ID).Scan(&others); err != nil {
		return err
	}
	if free-others-total < g.cfg.MinFreeBytes {
		g.log.Info("ingest: waiting for room to extract a container", "job", j.ID, "free", free, "reserved", others, "needed", total)
		return errStay
	}
	if _, err := g.store.db.Exec(ctx, `UPDATE curator.jobs SET space_needed = $2 WHERE id = $1`, j.ID, j.SpaceNeeded+total); err != nil {
		return fmt.Errorf("reserve room for job %d: %w", j.ID, err)
	}
	g.resv.sum += total
	return nil
}

// objectKey is where a file of an object version lives in the blob store.
func objectKey(ark string, version int, path string) string {
	return fmt.Sprintf("objects/%s/v%d/%s", strings.NewReplacer(":", "", "/", "_").Replace(ark), version, path)
}

// sysFile is a file ingest adds to the producer's.
type sysFile struct {
	name string
	body []byte
}

// systemFiles are the object's ERC, Dublin Core and checkm storage
// manifest, in that order, made from the processed job and its batch.
func systemFiles(j *JobRow, b *batchRow) []sysFile {
	title := firstOf(j.Title, b.Title)
	erc := fmt.Sprintf("erc:\nwho: %s\nwhat: %s\nwhen: %s\nwhere: %s\n", firstOf(b.Creator, "(:unav)"), firstOf(title, "(:unav)"), firstOf(b.Date, "(:unav)"), j.ARK)
	dc := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<dc xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n"+
		"  <dc:creator>%s</dc:creator>\n  <dc:title>%s</dc:title>\n  <dc:date>%s</dc:date>\n  <dc:identifier>%s</dc:identifier>\n</dc>\n",
		xmlEscape(b.Creator), xmlEscape(title), xmlEscape(b.Date), xmlEscape(j.ARK))
	out := []sysFile{{"mrt-erc.txt", []byte(erc)}, {"mrt-dc.xml", []byte(dc)}}
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%fields | nfo:fileName | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize\n")
	for _, f := range j.Files {
		fmt.Fprintf(&m, "producer/%s | sha256 | %s | %d\n", f.Name, f.SHA256, f.Size)
	}
	for _, f := range out {
		s := sha256.Sum256(f.body)
		fmt.Fprintf(&m, "system/%s | sha256 | %s | %d\n", f.name, hex.EncodeToString(s[:]), len(f.body))
	}
	m.WriteString("#%eof\n")
	return append(out, sysFile{"mrt-manifest.checkm", []byte(m.String())})
}

// allocateVersion gives the job the next version number of its object and
// keeps it on the job, in one transaction: two jobs of one ARK get two
// numbers, and a retry of the job keeps its number.
func (g *Ingester) allocateVersion(ctx context.Context, j *JobRow) (int, error) {
	var version int
	err := pgx.BeginFunc(ctx, g.store.db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT version FROM curator.jobs WHERE id = $1 FOR UPDATE`, j.ID).Scan(&version); err != nil {
			return err
		}
		if version != 0 {
			return nil
		}
		if err := tx.QueryRow(ctx, `INSERT INTO curator.ark_versions (ark, last)
			VALUES ($1, coalesce((SELECT versions FROM curator.inventory_objects WHERE ark = $1), 0) + 1)
			ON CONFLICT (ark) DO UPDATE SET last = ark_versions.last + 1 RETURNING last`, j.ARK).Scan(&version); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE curator.jobs SET version = $2 WHERE id = $1`, j.ID, version)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("version of %s for job %d: %w", j.ARK, j.ID, err)
	}
	return version, nil
}

// storeFiles puts the object's files and system files into the blob store
// as the next version of the object.
func (g *Ingester) storeFiles(ctx context.Context, j *JobRow) (Outcome, error) {
	id := j.ID
	version := j.Version
	if version == 0 {
		var err error
		if version, err = g.allocateVersion(ctx, j); err != nil {
			return Outcome{}, err
		}
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return Outcome{}, err
	}
	type item struct {
		path, local string
		body        []byte
		sha256      string // known: checked by the store, kept where its checksum digests nothing
	}
	put := func(it item) error {
		var r io.Reader = bytes.NewReader(it.body)
		if it.local != "" {
			f, err := os.Open(it.local)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		var props map[string]string
		if it.sha256 != "" {
			props = map[string]string{blob.PropSHA256: it.sha256}
		}
		if err := fenceEach(ctx); err != nil {
			return err
		}
		_, err := g.blob.Put(ctx, objectKey(j.ARK, version, it.path), r, props)
		return err
	}
	var items []item
	for _, f := range j.Files {
		items = append(items, item{path: "producer/" + f.Name, local: filepath.Join(g.jobDir(id), "payload", filepath.FromSlash(f.Name)), sha256: f.SHA256})
	}
	for _, f := range systemFiles(j, b) {
		sum := sha256.Sum256(f.body)
		items = append(items, item{path: "system/" + f.name, body: f.body, sha256: hex.EncodeToString(sum[:])})
	}
	// Several puts at once: a store's latency (a disk's sync, a bucket's
	// round trip) is paid once per wave, not once per file.
	errs := make([]error, len(items))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = put(it)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			if ctx.Err() != nil {
				return Outcome{}, ctx.Err()
			}
			if errors.Is(err, blob.ErrChecksumMismatch) {
				// The bytes are not those downloaded: no retry cures it.
				return Outcome{To: Failed, Detail: "storing " + items[i].path + ": " + err.Error()}, nil
			}
			// The store refusing or out: tried again (an outage pauses).
			return Outcome{}, fmt.Errorf("storing %s: %w", items[i].path, err)
		}
	}
	return Outcome{To: Recording, Detail: fmt.Sprintf("version %d", version), Set: map[string]any{"version": version}}, nil
}

// record checks every stored file reads back at its size, publishes
// archive.object.recorded for every file (de-duplicated
// by object key and version, so a retry publishes nothing twice) and writes
// the inventory in the transition's transaction.
func (g *Ingester) record(ctx context.Context, j *JobRow) (Outcome, error) {
	id := j.ID
	type row struct {
		path, key, sha string
		size           int64
	}
	var rows []row
	for _, f := range j.Files {
		rows = append(rows, row{"producer/" + f.Name, objectKey(j.ARK, j.Version, "producer/"+f.Name), f.SHA256, f.Size})
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return Outcome{}, err
	}
	for _, f := range systemFiles(j, b) {
		s := sha256.Sum256(f.body)
		rows = append(rows, row{"system/" + f.name, objectKey(j.ARK, j.Version, "system/"+f.name), hex.EncodeToString(s[:]), int64(len(f.body))})
	}
	// What recording writes down must be in the store, whole.
	for _, r := range rows {
		info, err := g.blob.Stat(ctx, r.key)
		if err != nil {
			// The store out or slow to show a new object: tried again,
			// within the budget (an outage pauses and spends nothing).
			return Outcome{}, fmt.Errorf("stored file %s cannot be read back: %w", r.path, err)
		}
		if info.Size != r.size {
			return Outcome{To: Failed, Detail: fmt.Sprintf("stored file %s has %d bytes, %d were stored", r.path, info.Size, r.size)}, nil
		}
	}
	var out []bus.Outgoing
	for _, r := range rows {
		ev := &events.ObjectRecorded{Object: r.key, SHA256: r.sha, Size: r.size, Update: j.Version > 1,
			Properties: map[string]string{"ark": j.ARK, "version": fmt.Sprint(j.Version), "path": r.path}}
		env, err := events.New("curator", ev)
		if err != nil {
			return Outcome{}, err
		}
		env.ID = fmt.Sprintf("recorded:%s", r.key) // the key names the version: a retry is a duplicate
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	if err := fence(ctx); err != nil {
		return Outcome{}, err
	}
	if err := g.bus.PublishBatch(ctx, out); err != nil {
		return Outcome{}, fmt.Errorf("publish %s recorded: %w", j.ARK, err)
	}
	manifest := objectKey(j.ARK, j.Version, "system/mrt-manifest.checkm")
	return Outcome{To: Notify, Detail: fmt.Sprintf("%s v%d, %d files", j.ARK, j.Version, len(rows)), Apply: func(ctx context.Context, tx pgx.Tx) error {
		// The object, its version and its files in one round trip.
		var b pgx.Batch
		b.Queue(`INSERT INTO curator.inventory_objects (ark, profile, local_id, title, versions) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (ark) DO UPDATE SET versions = greatest(inventory_objects.versions, EXCLUDED.versions), updated_at = now()`,
			j.ARK, j.Profile, j.LocalID, j.Title, j.Version)
		b.Queue(`INSERT INTO curator.inventory_versions (ark, version, job_id, manifest_key) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, j.ARK, j.Version, id, manifest)
		for _, r := range rows {
			b.Queue(`INSERT INTO curator.inventory_files (ark, version, path, key, size, sha256) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT DO NOTHING`, j.ARK, j.Version, r.path, r.key, r.size, r.sha)
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return fmt.Errorf("inventory of %s v%d: %w", j.ARK, j.Version, err)
		}
		return nil
	}}, nil
}

// notify tells the batch's callback of the job's end (if it has one) and
// cleans the job's working directory.
func (g *Ingester) notify(ctx context.Context, j *JobRow) (Outcome, error) {
	id := j.ID
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return Outcome{}, err
	}
	if b.CB != "" {
		body, _ := json.Marshal(map[string]any{"batch": b.ID, "job": j.ID, "ark": j.ARK, "version": j.Version, "local_id": j.LocalID, "state": "completed"})
		if err := fence(ctx); err != nil {
			return Outcome{}, err
		}
		if last := g.postRetrying(ctx, b.CB, body); last != nil {
			// A callback that refuses (4xx) fails the job; one that is down
			// is tried again, backing off, within the budget.
			if fault.IsPermanent(last) {
				return Outcome{To: Failed, Detail: "callback: " + last.Error()}, nil
			}
			return Outcome{}, fmt.Errorf("callback: %w", last)
		}
	}
	if err := os.RemoveAll(g.jobDir(id)); err != nil {
		g.log.Warn("ingest: clean working directory", "job", id, "err", err)
	}
	return Outcome{To: Completed}, nil
}

// postRetrying posts body to u up to INGEST_RETRIES times, waiting longer
// after each failure; it returns the last failure.
// originStatus marks an origin's answer: a 4xx (but for 408 Request
// Timeout, 425 Too Early and 429 Too Many Requests) says the request is
// wrong and will stay wrong: permanent; a 5xx or one of those may pass.
func originStatus(err error, code int) error {
	if code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooEarly && code != http.StatusTooManyRequests {
		return fault.Permanent(err)
	}
	return err
}

func (g *Ingester) postRetrying(ctx context.Context, u string, body []byte) error {
	var last error
	for try := range max(g.cfg.Retries, 1) {
		if try > 0 {
			time.Sleep(time.Duration(try*try) * 200 * time.Millisecond)
		}
		if last = g.post(ctx, u, body); last == nil {
			return nil
		}
	}
	return last
}

func (g *Ingester) post(ctx context.Context, u string, body []byte) error {
	if err := g.allowedURL(u); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return originStatus(fmt.Errorf("POST %s: %s", u, resp.Status), resp.StatusCode)
	}
	return nil
}

// Report is a batch's report. It is stored in the blob store (under
// reports/batch-ID.json, and each report of the batch under
// reports/batch-ID-SEQUENCE.json) and on the batch row, and sent to the
// batch's callback URL.
type Report struct {
	// Type is "batch-report", which tells it from a job's callback.
	Type      string           `json:"type"`
	Batch     int64            `json:"batch"`
	Jobs      map[State]int    `json:"jobs"`
	Failed    []FailedJob      `json:"failed,omitempty"`
	Objects   []ReportedObject `json:"objects"`
	WrittenAt time.Time        `json:"written_at"`
	// Sequence numbers the batch's reports from 1 (update-reporting writes
	// the next).
	Sequence int `json:"sequence"`
	// PreviousWrittenAt and Changes, in a report after the first, say when
	// the previous one was written and which jobs changed since.
	PreviousWrittenAt *time.Time  `json:"previous_written_at,omitempty"`
	Changes           []JobChange `json:"changes,omitempty"`
}

// JobChange is a job whose outcome changed between two reports: Was and
// Now are "completed vN", "failed in STATE" or "not reported".
type JobChange struct {
	Job int64  `json:"job"`
	Was string `json:"was"`
	Now string `json:"now"`
}

// outcomes are a report's jobs' outcomes, by job.
func (r *Report) outcomes() map[int64]string {
	out := map[int64]string{}
	for _, o := range r.Objects {
		out[o.Job] = fmt.Sprintf("completed v%d", o.Version)
	}
	for _, f := range r.Failed {
		out[f.Job] = fmt.Sprintf("failed in %s", f.State)
	}
	return out
}

// changesSince lists the jobs whose outcome differs from prev's, by job.
func (r *Report) changesSince(prev *Report) []JobChange {
	was, now := prev.outcomes(), r.outcomes()
	var jobs []int64
	for j := range was {
		jobs = append(jobs, j)
	}
	for j := range now {
		if _, ok := was[j]; !ok {
			jobs = append(jobs, j)
		}
	}
	slices.Sort(jobs)
	var out []JobChange
	for _, j := range jobs {
		w, n := was[j], now[j]
		if w == n {
			continue
		}
		if w == "" {
			w = "not reported"
		}
		if n == "" {
			n = "not reported"
		}
		out = append(out, JobChange{Job: j, Was: w, Now: n})
	}
	return out
}

// FailedJob is a failed job in a report.
type FailedJob struct {
	Job   int64  `json:"job"`
	State State  `json:"last_successful"`
	Error string `json:"error"`
}

// ReportedObject is a completed object in a report.
type ReportedObject struct {
	Job     int64  `json:"job"`
	ARK     string `json:"ark"`
	Version int    `json:"version"`
	LocalID string `json:"local_id,omitempty"`
}

func (g *Ingester) batchReport(from State) Work {
	return onBatch(func(ctx context.Context, id int64) (Outcome, error) {
		rep := Report{Type: "batch-report", Batch: id, Jobs: map[State]int{}, Objects: []ReportedObject{}, WrittenAt: time.Now().UTC(), Sequence: 1}
		var prevRaw []byte
		var callback string
		if err := g.store.db.QueryRow(ctx, `SELECT report, callback_url FROM curator.batches WHERE id = $1`, id).Scan(&prevRaw, &callback); err != nil {
			return Outcome{}, fmt.Errorf("batch %d: %w", id, err)
		}
		var prev *Report
		if len(prevRaw) > 0 {
			prev = &Report{}
			if err := json.Unmarshal(prevRaw, prev); err != nil {
				g.log.Warn("ingest: the previous report is unreadable; writing a first one", "batch", id, "err", err)
				prev = nil
			}
		}
		rows, err := g.store.db.Query(ctx, `SELECT id, state, last_successful, error, ark, version, local_id FROM curator.jobs WHERE batch_id = $1 ORDER BY id`, id)
		if err != nil {
			return Outcome{}, err
		}
		for rows.Next() {
			var jid int64
			var st, last State
			var msg, ark, local string
			var v int
			if err := rows.Scan(&jid, &st, &last, &msg, &ark, &v, &local); err != nil {
				rows.Close()
				return Outcome{}, err
			}
			rep.Jobs[st]++
			switch st {
			case Failed:
				rep.Failed = append(rep.Failed, FailedJob{jid, last, msg})
			case Completed:
				rep.Objects = append(rep.Objects, ReportedObject{jid, ark, v, local})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return Outcome{}, err
		}
		if prev != nil {
			rep.Sequence = prev.Sequence + 1
			at := prev.WrittenAt
			rep.PreviousWrittenAt = &at
			rep.Changes = rep.changesSince(prev)
		}
		body, _ := json.MarshalIndent(rep, "", "  ")
		if err := fence(ctx); err != nil {
			return Outcome{}, err
		}
		for _, key := range []string{fmt.Sprintf("reports/batch-%d-%d.json", id, rep.Sequence), fmt.Sprintf("reports/batch-%d.json", id)} {
			if _, err := g.blob.Put(ctx, key, bytes.NewReader(body), nil); err != nil {
				return Outcome{}, err
			}
		}
		to, detail := Completed, fmt.Sprintf("%d objects", len(rep.Objects))
		open := 0
		for st, n := range rep.Jobs {
			if st != Completed && st != Deleted {
				open += n
			}
		}
		if open > 0 {
			to, detail = Failed, fmt.Sprintf("%d of %d jobs not completed", open, open+rep.Jobs[Completed])
		}
		if len(rep.Changes) > 0 {
			detail += fmt.Sprintf("; %d changed since report %d", len(rep.Changes), rep.Sequence-1)
		}
		// The depositor is sent the report. A callback that does not take
		// it does not change the batch's outcome: the move's detail says
		// so, and update-reporting sends it again.
		if callback != "" {
			if err := fence(ctx); err != nil {
				return Outcome{}, err
			}
			if last := g.postRetrying(ctx, callback, body); last != nil {
				detail += "; report not delivered: " + last.Error()
				g.log.Warn("ingest: batch report not delivered", "batch", id, "err", last)
			} else {
				detail += "; report delivered"
			}
		}
		return Outcome{To: to, Detail: detail, Set: map[string]any{"report": body}}, nil
	})
}
