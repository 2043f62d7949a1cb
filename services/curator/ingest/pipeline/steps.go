package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
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

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/container"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
	"github.com/archivist/archivist/services/curator/ingest/fetch"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
	"github.com/archivist/archivist/services/curator/ingest/report"
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
	store   *ingest.Store
	blob    blob.Store
	bus     *bus.Bus
	log     *slog.Logger
	fetch   *fetch.Client
	daemons *daemon.Set
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
func New(cfg Config, s *ingest.Store, bs blob.Store, b *bus.Bus, log *slog.Logger) (*Ingester, error) {
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(os.TempDir(), "archivist-ingest")
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("ingest work dir: %w", err)
	}
	g := &Ingester{cfg: cfg, store: s, blob: bs, bus: b, log: log}
	var err error
	g.fetch, err = fetch.New(fetch.Config{AllowedHosts: cfg.AllowedHosts, AllowPrivate: cfg.AllowPrivate, HTTPProxy: cfg.HTTPProxy,
		ResponseTimeout: cfg.ResponseTimeout, IdleTimeout: cfg.IdleTimeout, RequestTimeout: cfg.RequestTimeout,
		Retries: cfg.Retries, MaxFileBytes: cfg.MaxFileBytes, WorkDir: cfg.WorkDir, MinFreeBytes: cfg.MinFreeBytes})
	if err != nil {
		return nil, err
	}
	d, err := daemon.NewSet(s, daemon.SetConfig{Interval: cfg.Interval, RetryMax: cfg.RetryMax, RetryBudget: cfg.RetryBudget,
		MaxAttempts: cfg.MaxAttempts, Concurrency: cfg.Concurrency, MaxClaims: cfg.MaxClaims, StepTimeout: cfg.StepTimeout, JobTimeout: cfg.JobTimeout}, log)
	if err != nil {
		return nil, err
	}
	g.daemons = d
	d.Add(ingest.Batch, ingest.Pending, onBatch(g.batchPending))
	d.Add(ingest.Batch, ingest.Reporting, g.batchReport(ingest.Reporting))
	d.Add(ingest.Batch, ingest.UpdateReporting, g.batchReport(ingest.UpdateReporting))
	d.Add(ingest.Job, ingest.Pending, g.onJob(g.jobPending))
	d.Add(ingest.Job, ingest.Estimating, g.onJob(g.estimate))
	d.Add(ingest.Job, ingest.Provisioning, g.onJob(g.provision))
	d.Add(ingest.Job, ingest.Downloading, g.onJob(g.download))
	d.Add(ingest.Job, ingest.Processing, g.onJob(g.process))
	d.Add(ingest.Job, ingest.Storing, g.onJob(g.storeFiles))
	d.Add(ingest.Job, ingest.Recording, g.onJob(g.record))
	d.Add(ingest.Job, ingest.Notify, g.onJob(g.notify))
	return g, nil
}

// onBatch makes a batch step a Work.
func onBatch(step func(ctx context.Context, id int64) (daemon.Outcome, error)) daemon.Work {
	return func(ctx context.Context, c *daemon.Claim) (daemon.Outcome, error) { return step(ctx, c.ID) }
}

// onJob makes a job step a Work: it starts from the job as the claim's
// last move left it, or reads it.
func (g *Ingester) onJob(step func(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error)) daemon.Work {
	return func(ctx context.Context, c *daemon.Claim) (daemon.Outcome, error) {
		j := c.Job()
		if j == nil {
			var err error
			if j, err = g.store.Job(ctx, c.ID); err != nil {
				return daemon.Outcome{}, err
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
var activeDirStates = []ingest.State{ingest.Downloading, ingest.Processing, ingest.Storing}

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
		rows, err := g.store.DB.Query(ctx, `WITH idle AS (
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
	if err := g.store.DB.QueryRow(ctx, `SELECT id, submitter, profile, payload_url, type, title, creator, date, callback_url
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

// scanManifest streams the manifest at u through manifest.ScanCheckm within the
// configured bounds; object says its rows are one object's files (their
// names distinct), not objects of their own. A manifest that cannot be read
// is a *manifestError saying so; one that breaks a bound or is malformed
// says why.
func (g *Ingester) scanManifest(ctx context.Context, u string, object bool, fn func(manifest.Row) error) error {
	body, err := g.fetch.Open(ctx, u)
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
	files                     []ingest.File
}

// batchPending: a held collection holds the batch; else the payload is
// read and one job per object created, in the transition's transaction.
func (g *Ingester) batchPending(ctx context.Context, id int64) (daemon.Outcome, error) {
	b, err := g.batch(ctx, id)
	if err != nil {
		return daemon.Outcome{}, err
	}
	if held, err := g.store.Held(ctx, b.Profile); err != nil {
		return daemon.Outcome{}, err
	} else if held {
		return daemon.Outcome{To: ingest.Held, Detail: "collection " + b.Profile + " is held"}, nil
	}
	var jobs []newJob
	files := 0
	count := func(n int) error {
		if files += n; files > g.cfg.MaxBatchFiles {
			return fmt.Errorf("the batch lists more than %d files (INGEST_MAX_BATCH_FILES)", g.cfg.MaxBatchFiles)
		}
		return nil
	}
	fail := func(err error, manifest string) (daemon.Outcome, error) {
		var me *manifestError
		if errors.As(err, &me) && me.what == "reading" {
			return daemon.Outcome{To: ingest.Failed, Detail: "reading " + manifest + ": " + err.Error()}, nil
		}
		return daemon.Outcome{To: ingest.Failed, Detail: "corrupt " + manifest + ": " + err.Error()}, nil
	}
	switch b.Type {
	case "file":
		jobs = []newJob{{kind: "file", url: b.PayloadURL, title: b.Title, files: []ingest.File{{URL: b.PayloadURL, Name: nameOf(b.PayloadURL)}}}}
	case "container":
		jobs = []newJob{{kind: "container", url: b.PayloadURL, title: b.Title}}
	case "manifest":
		j := newJob{kind: "manifest", url: b.PayloadURL, title: b.Title}
		err := g.scanManifest(ctx, b.PayloadURL, true, func(r manifest.Row) error {
			j.files = append(j.files, ingest.File{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size})
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
			return daemon.Outcome{To: ingest.Failed, Detail: "the payload lists no object"}, nil
		}
		return daemon.Outcome{To: ingest.Processing, Detail: fmt.Sprintf("%d jobs", n), Apply: func(ctx context.Context, tx pgx.Tx) error {
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
				j.files = append(j.files, ingest.File{URL: f.URL, Name: f.Name, DigestAlg: f.DigestAlg, Digest: f.Digest, Size: f.Size})
				return count(1)
			})
			if err != nil {
				return fail(err, "object manifest "+r.URL)
			}
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return daemon.Outcome{To: ingest.Failed, Detail: "the payload lists no object"}, nil
	}
	return daemon.Outcome{To: ingest.Processing, Detail: fmt.Sprintf("%d jobs", len(jobs)), Apply: func(ctx context.Context, tx pgx.Tx) error {
		rows := make([][]any, len(jobs))
		for i, j := range jobs {
			files := j.files
			if files == nil {
				files = []ingest.File{}
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
		[]ingest.File{{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size}}}, nil
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

func (g *Ingester) jobPending(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	if held, err := g.store.Held(ctx, j.Profile); err != nil {
		return daemon.Outcome{}, err
	} else if held {
		return daemon.Outcome{To: ingest.Held, Detail: "collection " + j.Profile + " is held"}, nil
	}
	if j.Kind != "container" && len(j.Files) == 0 {
		return daemon.Outcome{To: ingest.Failed, Detail: "the object lists no file"}, nil
	}
	return daemon.Outcome{To: ingest.Estimating}, nil
}

// estimate HEADs every file for its size. It never fails: a size it cannot
// learn counts 0. A job over LargeJobBytes goes behind the others.
func (g *Ingester) estimate(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
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
		if g.fetch.Allowed(p.url) != nil {
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
			if resp, err := g.fetch.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && resp.ContentLength > 0 {
					sizes[i] = resp.ContentLength
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return daemon.Outcome{}, ctx.Err()
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
	return daemon.Outcome{To: ingest.Provisioning, Detail: detail, Set: set}, nil
}

// provision waits until the working area has room for the job.
func (g *Ingester) provision(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.cfg.WorkDir, &st); err != nil {
		return daemon.Outcome{}, fmt.Errorf("free space of %s: %w", g.cfg.WorkDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	g.resv.mu.Lock()
	defer g.resv.mu.Unlock()
	if time.Since(g.resv.at) >= reservationTTL {
		if err := g.store.DB.QueryRow(ctx, `SELECT coalesce(sum(space_needed), 0) FROM curator.jobs WHERE state IN ('downloading', 'processing')`).Scan(&g.resv.sum); err != nil {
			return daemon.Outcome{}, err
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
		return daemon.Outcome{}, daemon.ErrStay
	}
	// Counted until the sum is read again: what this process lets through
	// meanwhile is reserved at once.
	g.resv.sum += j.SpaceNeeded
	return daemon.Outcome{To: ingest.Downloading}, nil
}

// reservationTTL is how long provisioning trusts the working area's
// reserved bytes (the sum of space needed by jobs downloading and
// processing) before reading it again, adding what it lets through
// meanwhile: reading it for every job was a statement of 0.5-0.7 ms per
// job over a busy table.
const reservationTTL = 200 * time.Millisecond

// download GETs every file into the job's directory (several at once),
// retrying, and checks declared digests and sizes. A mismatch fails the
// job at once.
func (g *Ingester) download(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	dir := filepath.Join(g.jobDir(id), "payload")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return daemon.Outcome{}, err
	}
	files := j.Files
	if j.Kind == "container" {
		files = []ingest.File{{URL: j.PayloadURL, Name: "container.zip", Reported: j.SpaceNeeded}}
		dir = g.jobDir(id)
	}
	errs := make(chan error, len(files))
	sem := make(chan struct{}, 4)
	for i := range files {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- g.fetch.Download(ctx, &files[i], filepath.Join(dir, filepath.FromSlash(files[i].Name)))
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
			return daemon.Outcome{}, ctx.Err()
		}
		if errors.Is(failure, daemon.ErrFenced) {
			return daemon.Outcome{}, failure
		}
		// Content that is not what the manifest says, a URL not allowed, a
		// 4xx: the job fails at once. An origin that is down or refusing
		// for now: it is tried again, backing off, within the budget.
		if fault.IsPermanent(failure) {
			return daemon.Outcome{To: ingest.Failed, Detail: failure.Error()}, nil
		}
		return daemon.Outcome{}, failure
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	set := map[string]any{"space_needed": total}
	if j.Kind != "container" {
		set["files"] = files
	}
	return daemon.Outcome{To: ingest.Processing, Detail: fmt.Sprintf("%d files, %d bytes", len(files), total), Set: set}, nil
}

// process unpacks a container and mints the object's ARK (once: a restart
// finds it on the job). The ERC and Dublin Core files and the storage
// manifest follow from the job, its files and its batch alone
// (systemFiles): storing and recording make them again rather than keep
// them on disk, where every file costs a create and an unlink.
func (g *Ingester) process(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	files := j.Files
	var err error
	if j.Kind == "container" {
		src := filepath.Join(g.jobDir(id), "container.zip")
		lim := container.Limits{MaxBytes: g.cfg.MaxFileBytes, MaxEntries: g.cfg.MaxZipEntries, MaxRatio: g.cfg.MaxZipRatio}
		zr, total, err := container.Open(src, lim)
		if err != nil {
			return daemon.Outcome{To: ingest.Failed, Detail: "corrupt container: " + err.Error()}, nil
		}
		defer zr.Close()
		if err := g.reserveContent(ctx, j, total); err != nil {
			return daemon.Outcome{}, err
		}
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		entries, err := container.Extract(zr, filepath.Join(g.jobDir(id), "payload"))
		if err != nil {
			return daemon.Outcome{To: ingest.Failed, Detail: "corrupt container: " + err.Error()}, nil
		}
		files = make([]ingest.File, len(entries))
		for i, e := range entries {
			files[i] = ingest.File{Name: e.Name, Size: e.Size, SHA256: e.SHA256}
		}
	}
	if err := daemon.Fence(ctx); err != nil {
		return daemon.Outcome{}, err
	}
	ark, err := g.mint(ctx, j)
	if err != nil {
		return daemon.Outcome{}, err
	}
	out := daemon.Outcome{To: ingest.Storing, Detail: ark}
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
func (g *Ingester) mint(ctx context.Context, j *ingest.JobRow) (string, error) {
	if j.ARK != "" {
		return j.ARK, nil
	}
	var ark string
	if j.LocalID != "" {
		if err := g.store.DB.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE submitter = $1 AND profile = $2 AND local_id = $3`, j.Submitter, j.Profile, j.LocalID).Scan(&ark); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("ark of local id %s: %w", j.LocalID, err)
		}
	}
	if ark == "" {
		var n int64
		if err := g.store.DB.QueryRow(ctx, `SELECT nextval('curator.ark_seq')`).Scan(&n); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		ark = g.cfg.ARKPrefix + noid(n)
		// Minted and kept on the job by one statement: a crash keeps both or
		// neither (a lost number is a gap, never a second ARK).
		if _, err := g.store.DB.Exec(ctx, `WITH a AS (INSERT INTO curator.arks (ark, submitter, profile, local_id, job_id) VALUES ($1, $5, $2, $3, $4) RETURNING ark)
			UPDATE curator.jobs SET ark = a.ark FROM a WHERE id = $4 AND jobs.ark = ''`, ark, j.Profile, j.LocalID, j.ID, j.Submitter); err != nil {
			return "", fmt.Errorf("mint %s: %w", ark, err)
		}
		return ark, nil
	}
	if _, err := g.store.DB.Exec(ctx, `UPDATE curator.jobs SET ark = $2 WHERE id = $1 AND ark = ''`, j.ID, ark); err != nil {
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
func (g *Ingester) reserveContent(ctx context.Context, j *ingest.JobRow, total int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.cfg.WorkDir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", g.cfg.WorkDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	g.resv.mu.Lock()
	defer g.resv.mu.Unlock()
	var others int64
	if err := g.store.DB.QueryRow(ctx, `SELECT coalesce(sum(space_needed), 0) FROM curator.jobs
		WHERE state IN ('downloading', 'processing') AND id <> $1`, j.ID).Scan(&others); err != nil {
		return err
	}
	if free-others-total < g.cfg.MinFreeBytes {
		g.log.Info("ingest: waiting for room to extract a container", "job", j.ID, "free", free, "reserved", others, "needed", total)
		return daemon.ErrStay
	}
	if _, err := g.store.DB.Exec(ctx, `UPDATE curator.jobs SET space_needed = $2 WHERE id = $1`, j.ID, j.SpaceNeeded+total); err != nil {
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
func systemFiles(j *ingest.JobRow, b *batchRow) []sysFile {
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
func (g *Ingester) allocateVersion(ctx context.Context, j *ingest.JobRow) (int, error) {
	var version int
	err := pgx.BeginFunc(ctx, g.store.DB, func(tx pgx.Tx) error {
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
func (g *Ingester) storeFiles(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	version := j.Version
	if version == 0 {
		var err error
		if version, err = g.allocateVersion(ctx, j); err != nil {
			return daemon.Outcome{}, err
		}
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
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
		if err := daemon.FenceEach(ctx); err != nil {
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
				return daemon.Outcome{}, ctx.Err()
			}
			if errors.Is(err, blob.ErrChecksumMismatch) {
				// The bytes are not those downloaded: no retry cures it.
				return daemon.Outcome{To: ingest.Failed, Detail: "storing " + items[i].path + ": " + err.Error()}, nil
			}
			// The store refusing or out: tried again (an outage pauses).
			return daemon.Outcome{}, fmt.Errorf("storing %s: %w", items[i].path, err)
		}
	}
	return daemon.Outcome{To: ingest.Recording, Detail: fmt.Sprintf("version %d", version), Set: map[string]any{"version": version}}, nil
}

// record checks every stored file reads back at its size, publishes
// archive.object.recorded for every file (de-duplicated
// by object key and version, so a retry publishes nothing twice) and writes
// the inventory in the transition's transaction.
func (g *Ingester) record(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
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
		return daemon.Outcome{}, err
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
			return daemon.Outcome{}, fmt.Errorf("stored file %s cannot be read back: %w", r.path, err)
		}
		if info.Size != r.size {
			return daemon.Outcome{To: ingest.Failed, Detail: fmt.Sprintf("stored file %s has %d bytes, %d were stored", r.path, info.Size, r.size)}, nil
		}
	}
	var out []bus.Outgoing
	for _, r := range rows {
		ev := &events.ObjectRecorded{Object: r.key, SHA256: r.sha, Size: r.size, Update: j.Version > 1,
			Properties: map[string]string{"ark": j.ARK, "version": fmt.Sprint(j.Version), "path": r.path}}
		env, err := events.New("curator", ev)
		if err != nil {
			return daemon.Outcome{}, err
		}
		env.ID = fmt.Sprintf("recorded:%s", r.key) // the key names the version: a retry is a duplicate
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	if err := daemon.Fence(ctx); err != nil {
		return daemon.Outcome{}, err
	}
	if err := g.bus.PublishBatch(ctx, out); err != nil {
		return daemon.Outcome{}, fmt.Errorf("publish %s recorded: %w", j.ARK, err)
	}
	manifest := objectKey(j.ARK, j.Version, "system/mrt-manifest.checkm")
	return daemon.Outcome{To: ingest.Notify, Detail: fmt.Sprintf("%s v%d, %d files", j.ARK, j.Version, len(rows)), Apply: func(ctx context.Context, tx pgx.Tx) error {
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
func (g *Ingester) notify(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
	}
	if b.CB != "" {
		body, _ := json.Marshal(map[string]any{"batch": b.ID, "job": j.ID, "ark": j.ARK, "version": j.Version, "local_id": j.LocalID, "state": "completed"})
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		if last := g.fetch.PostRetrying(ctx, b.CB, body); last != nil {
			// A callback that refuses (4xx) fails the job; one that is down
			// is tried again, backing off, within the budget.
			if fault.IsPermanent(last) {
				return daemon.Outcome{To: ingest.Failed, Detail: "callback: " + last.Error()}, nil
			}
			return daemon.Outcome{}, fmt.Errorf("callback: %w", last)
		}
	}
	if err := os.RemoveAll(g.jobDir(id)); err != nil {
		g.log.Warn("ingest: clean working directory", "job", id, "err", err)
	}
	return daemon.Outcome{To: ingest.Completed}, nil
}

// postRetrying posts body to u up to INGEST_RETRIES times, waiting longer
// after each failure; it returns the last failure.
func (g *Ingester) batchReport(from ingest.State) daemon.Work {
	return onBatch(func(ctx context.Context, id int64) (daemon.Outcome, error) {
		rep, callback, err := report.Write(ctx, g.store.DB, id, g.log)
		if err != nil {
			return daemon.Outcome{}, err
		}
		body, _ := json.MarshalIndent(rep, "", "  ")
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		for _, key := range []string{fmt.Sprintf("reports/batch-%d-%d.json", id, rep.Sequence), fmt.Sprintf("reports/batch-%d.json", id)} {
			if _, err := g.blob.Put(ctx, key, bytes.NewReader(body), nil); err != nil {
				return daemon.Outcome{}, err
			}
		}
		to, detail := rep.Outcome()
		// The depositor is sent the report. A callback that does not take
		// it does not change the batch's outcome: the move's detail says
		// so, and update-reporting sends it again.
		if callback != "" {
			if err := daemon.Fence(ctx); err != nil {
				return daemon.Outcome{}, err
			}
			if last := g.fetch.PostRetrying(ctx, callback, body); last != nil {
				detail += "; report not delivered: " + last.Error()
				g.log.Warn("ingest: batch report not delivered", "batch", id, "err", last)
			} else {
				detail += "; report delivered"
			}
		}
		return daemon.Outcome{To: to, Detail: detail, Set: map[string]any{"report": body}}, nil
	})
}
