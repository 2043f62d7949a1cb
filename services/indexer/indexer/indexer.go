// Package indexer is the indexer service (wayback-automatic-indexing.txt,
// strategy 2: one file per task): it learns of ARC/WARC files from
// archive.object.recorded and from a scheduled listing of the repository,
// hands each due file out as a task (fewest failures first, then newest),
// indexes it into sorted CDX11, records the output and announces it with
// index.cdx.ready. A file that fails is tried again alone; after
// INDEXER_MAX_FAILURES it is parked for an operator.
package indexer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/checkpoint"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/indexer/cdx"
	"github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/indexer/registry"
	"github.com/archivist/archivist/services/indexer/warc"
)

// Config is the indexer's configuration.
type Config struct {
	// RepositoryPrefix is where in the blob store archive files are listed.
	RepositoryPrefix string `env:"INDEXER_REPOSITORY_PREFIX"`
	// OutputPrefix is where CDX outputs are written.
	OutputPrefix string `env:"INDEXER_OUTPUT_PREFIX, default=cdx/"`
	// ScanInterval is how often the repository is listed (a missed event
	// is caught by the next listing).
	ScanInterval time.Duration `env:"INDEXER_SCAN_INTERVAL, default=1m"`
	// ScanPage is how many keys one scan tick lists, after the last one
	// the scan registered: the leader walks the store a page a tick, and
	// starts over when a listing ends.
	ScanPage int `env:"INDEXER_SCAN_PAGE, default=10000"`
	// DispatchInterval is how often due files are handed out.
	DispatchInterval time.Duration `env:"INDEXER_DISPATCH_INTERVAL, default=2s"`
	// MaxFailures parks a file after this many failed attempts (for a
	// transient cause, only once it has also kept failing for RetryBudget).
	MaxFailures int `env:"INDEXER_MAX_FAILURES, default=3"`
	// RetryBase is the wait after a file's first failed attempt; it
	// doubles with each further failure, at most RetryMax.
	RetryBase time.Duration `env:"INDEXER_RETRY_BASE, default=30s"`
	// RetryMax caps the wait between a failed file's attempts.
	RetryMax time.Duration `env:"INDEXER_RETRY_MAX, default=1h"`
	// RetryBudget is how long a file may keep failing for a transient
	// cause (a read error of the store) before it is parked. An outage of
	// the store or the database spends nothing: the indexer pauses.
	RetryBudget time.Duration `env:"INDEXER_RETRY_BUDGET, default=24h"`
	// StaleAfter hands a queued file, or an indexing file whose claim was
	// not touched for this long (a lost task, a dead indexer: a live one
	// touches it every StaleAfter/3), out again.
	StaleAfter time.Duration `env:"INDEXER_STALE_AFTER, default=2m"`
	// TaskTimeout bounds indexing one file; a file that takes longer fails
	// that attempt (and after MaxFailures is parked).
	TaskTimeout time.Duration `env:"INDEXER_TASK_TIMEOUT, default=1h"`
	// WorkDir holds the sorted runs of a large file's CDX lines and its
	// output before upload ("" is the system's temporary directory).
	WorkDir string `env:"INDEXER_WORK_DIR"`
	// SpillBytes is how many bytes of CDX lines a task holds in memory
	// before sorting them to a run in WorkDir.
	SpillBytes int `env:"INDEXER_SPILL_BYTES, default=67108864"`
	// Concurrency is how many files one indexer indexes at once.
	Concurrency int `env:"INDEXER_CONCURRENCY, default=2"`
	// FileWorkers is how many cores one gzipped WARC is inflated and
	// indexed on (its members read in parallel spans); 0 is the cores
	// divided by INDEXER_CONCURRENCY.
	FileWorkers int `env:"INDEXER_FILE_WORKERS, default=0"`
	// HTTPAddr serves the index status and resets.
	HTTPAddr string `env:"INDEXER_HTTP_ADDR, default=:8083"`
}

// Definition is the indexer service.
func Definition() service.Definition {
	return service.Definition{
		Name:      "indexer",
		Summary:   "indexes every ARC/WARC file into CDX, one file per task",
		Schemas:   []store.Schema{migrations.Schema},
		NeedsDB:   true,
		NeedsBus:  true,
		NeedsBlob: true,
		Run:       service.Configured(run),
		Config:    new(Config),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	if cfg.StaleAfter < time.Second || cfg.TaskTimeout <= 0 {
		return fmt.Errorf("INDEXER_STALE_AFTER (%s) must be at least 1s and INDEXER_TASK_TIMEOUT (%s) positive", cfg.StaleAfter, cfg.TaskTimeout)
	}
	reg := registry.New(env.DB, cfg.MaxFailures, registry.WithRetry(cfg.RetryBase, cfg.RetryMax, cfg.RetryBudget))
	ix := New(env.Bus, reg, env.Blob, cfg, env.Log)
	ix.gate = env.Gate
	env.Log.Info("indexer: this build's inflate of gzip members", "inflate", warc.Inflate)
	env.ReadGauges([]service.Gauge{
		{Name: "archivist_index_files", Help: "Archive files by indexing status.", Labels: []string{"status"}},
		{Name: "archivist_index_oldest_unindexed_seconds", Help: "How long ago the oldest file not yet indexed was found (0: none): the index's freshness."},
	}, func(ctx context.Context) (service.Readings, error) {
		st, err := reg.Status(ctx)
		if err != nil {
			return nil, err
		}
		r := service.Readings{}
		for status, n := range st.ByStatus {
			r["archivist_index_files"] = append(r["archivist_index_files"], service.Read(float64(n), status))
		}
		age := 0.0
		if st.OldestUnindexed != nil {
			age = time.Since(*st.OldestUnindexed).Seconds()
		}
		r["archivist_index_oldest_unindexed_seconds"] = []service.Reading{service.Read(age)}
		return r, nil
	})
	recorded, err := bus.Consume(ctx, env.Bus, events.IndexerRecorded, ix.Recorded, bus.WithConcurrency(4))
	if err != nil {
		return err
	}
	deleted, err := bus.Consume(ctx, env.Bus, events.IndexerDeleted, ix.Deleted)
	if err != nil {
		recorded.Stop(context.WithoutCancel(ctx))
		return err
	}
	tasks, err := bus.Consume(ctx, env.Bus, events.Indexers, ix.Task, bus.WithConcurrency(cfg.Concurrency),
		bus.WithHandlerTimeout(cfg.TaskTimeout+time.Minute))
	if err != nil {
		return errors.Join(err, recorded.Stop(context.Background()), deleted.Stop(context.Background()))
	}
	loop := func(ctx context.Context) error { ix.Loop(ctx); return nil }
	// One replica lists the store, a page a tick, resuming where it
	// stopped: every replica used to list the whole store every minute.
	// The leader also keeps the checkpoint that takes again the files
	// recorded that a database restored to a backup lost (package
	// checkpoint): the bus never delivers their events again.
	keeper := ix.Checkpoint(env.DB, recorded, checkpoint.WithLogger(env.Log), checkpoint.WithGate(env.Gate))
	scan := env.AsLeader("indexer.scan", service.All(func(ctx context.Context) error {
		ix.scanStep(ctx)
		service.Every(cfg.ScanInterval, ix.scanStep)(ctx)
		return nil
	}, keeper.Run))
	return env.Serve(ctx, "index API", cfg.HTTPAddr, ix.Handler(), []service.Loop{loop, scan}, tasks.Stop, recorded.Stop, deleted.Stop)
}

// Indexer is the indexer's logic on its dependencies.
type Indexer struct {
	bus  *bus.Bus
	reg  *registry.Registry
	blob blob.Store
	cfg  Config
	log  *slog.Logger
	wake chan struct{}
	// gate pauses the loop while a dependency is down, and tells a task's
	// failure in an outage from the file's (nil: no pausing).
	gate *fault.Gate
}

// New returns an indexer.
func New(b *bus.Bus, reg *registry.Registry, bs blob.Store, cfg Config, log *slog.Logger) *Indexer {
	return &Indexer{bus: b, reg: reg, blob: bs, cfg: cfg, log: log, wake: make(chan struct{}, 1)}
}

func (ix *Indexer) wakeUp() {
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// Checkpoint is the keeper, in db (the indexer's schema), of the
// checkpoint of sub, the indexer's subscription to recorded archive files
// (events.IndexerRecorded): Recorded takes a replay as one (a file
// registered already is left as it is).
func (ix *Indexer) Checkpoint(db *pgxpool.Pool, sub *bus.Subscription, opts ...checkpoint.Option) *checkpoint.Keeper {
	return checkpoint.For(db, "indexer.checkpoints", ix.bus, sub, events.IndexerRecorded, ix.Recorded, opts...)
}

// Recorded registers an archive file recorded by ingest.
func (ix *Indexer) Recorded(ctx context.Context, m *bus.Message[events.ObjectRecorded]) error {
	isNew, err := ix.reg.Discover(ctx, m.Event.Object, m.Event.Size)
	if isNew {
		ix.log.InfoContext(ctx, "archive file recorded", "file", m.Event.Object)
		ix.wakeUp()
	}
	return err
}

// Deleted records an archive file deleted from the archive (an object
// withdrawn): it is not indexed from now on.
func (ix *Indexer) Deleted(ctx context.Context, m *bus.Message[events.ObjectDeleted]) error {
	return ix.reg.Deleted(ctx, m.Event.Object, "deleted from the archive")
}

// Loop hands out due files and announces outputs until ctx ends (the
// leader's scan finds files no event announced).
func (ix *Indexer) Loop(ctx context.Context) {
	dispatch := time.NewTicker(ix.cfg.DispatchInterval)
	defer dispatch.Stop()
	for {
		// While a dependency is down nothing is handed out or announced.
		if ix.gate.Wait(ctx) != nil {
			return
		}
		if err := ix.Dispatch(ctx); err != nil && ctx.Err() == nil && !ix.gate.Observe(ctx, err) {
			ix.log.ErrorContext(ctx, "dispatch", "err", err)
		}
		if err := ix.Announce(ctx); err != nil && ctx.Err() == nil && !ix.gate.Observe(ctx, err) {
			ix.log.ErrorContext(ctx, "announce", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-dispatch.C:
		case <-ix.wake:
		}
	}
}

// scanStep scans one page, once the dependencies answer, and logs what it
// found.
func (ix *Indexer) scanStep(ctx context.Context) {
	if ix.gate.Wait(ctx) != nil {
		return
	}
	r, err := ix.ScanPage(ctx, max(ix.cfg.ScanPage, 1))
	switch {
	case err != nil && ctx.Err() == nil && !ix.gate.Observe(ctx, err):
		ix.log.ErrorContext(ctx, "scan the repository", "err", err)
	case r.Found > 0:
		ix.log.InfoContext(ctx, "archive files found by the repository scan", "files", r.Found, "listed", r.Listed)
	}
	if r.CycleDone {
		ix.log.DebugContext(ctx, "repository scan cycle done", "listed", r.Listed)
	}
}

// ScanResult is what one page of the repository scan did.
type ScanResult struct {
	// Listed and Found are the keys listed and the files new to the
	// registry among them.
	Listed, Found int
	// CycleDone says the listing ended: the next page starts over.
	CycleDone bool
}

// ScanPage lists up to page keys of the repository after the last one
// the scan registered, registers the archive files among them, and keeps
// where it stopped; a listing that ends sends the next page to the start.
// Its cost is the page's, not the store's.
func (ix *Indexer) ScanPage(ctx context.Context, page int) (ScanResult, error) {
	var r ScanResult
	after, err := ix.reg.ScanCursor(ctx)
	if err != nil {
		return r, err
	}
	infos, err := blob.ListAfter(ctx, ix.blob, ix.cfg.RepositoryPrefix, after, page)
	if err != nil {
		return r, fmt.Errorf("list the repository after %q: %w", after, err)
	}
	keys, sizes := make([]string, len(infos)), make([]int64, len(infos))
	for i, info := range infos {
		keys[i], sizes[i] = info.Key, info.Size
	}
	r.Listed = len(infos)
	if r.Found, err = ix.reg.DiscoverAll(ctx, keys, sizes); err != nil {
		return r, err
	}
	next := ""
	if len(infos) == page {
		next = infos[len(infos)-1].Key
	} else {
		r.CycleDone = true
	}
	return r, ix.reg.SetScanCursor(ctx, next, after == "")
}

// Dispatch publishes a task for every due file.
func (ix *Indexer) Dispatch(ctx context.Context) error {
	due, err := ix.reg.TakeDue(ctx, 100, ix.cfg.StaleAfter)
	if err != nil || len(due) == 0 {
		return err
	}
	out := make([]bus.Outgoing, 0, len(due))
	for _, d := range due {
		env, err := events.New(ix.bus.Producer(), &events.IndexTask{File: d.Name, Attempt: d.Attempt})
		if err != nil {
			return err
		}
		env.ID = fmt.Sprintf("index:%s:%d", d.Name, d.Attempt)
		out = append(out, bus.Outgoing{Subject: events.SubjectIndexTask, Envelope: env})
	}
	return ix.bus.PublishBatch(ctx, out)
}

// Announce publishes index.cdx.ready for every recorded, unannounced
// output: the registry is the outbox, so a crash between recording and
// publishing delays the announcement, never loses it.
func (ix *Indexer) Announce(ctx context.Context) error {
	unannounced, err := ix.reg.Unannounced(ctx, 100)
	if err != nil {
		return err
	}
	for _, a := range unannounced {
		env, err := events.New(ix.bus.Producer(), &events.IndexCDXReady{File: a.File, Output: a.Output, Lines: a.Lines, Complete: a.Complete})
		if err != nil {
			return err
		}
		env.ID = "ready:" + a.Output
		if _, err := ix.bus.Publish(ctx, events.SubjectIndexCDXReady, env); err != nil {
			return err
		}
		if err := ix.reg.Announced(ctx, a.File, a.Output); err != nil {
			return err
		}
	}
	return nil
}

// Task indexes one file: its sorted CDX11 written under a name of this
// attempt's own, then recorded as the file's output in one statement, then
// announced.
func (ix *Indexer) Task(ctx context.Context, m *bus.Message[events.IndexTask]) error {
	d := registry.Due{Name: m.Event.File, Attempt: m.Event.Attempt}
	log := ix.log.With("file", d.Name, "attempt", d.Attempt)
	ok, err := ix.reg.Claim(ctx, d)
	if err != nil || !ok {
		if !ok && err == nil {
			log.InfoContext(ctx, "stale task dropped: the file was handed out again")
		}
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, ix.cfg.TaskTimeout)
	defer cancel()
	// While the task runs its claim is touched, so that a long file is not
	// taken for the file of a dead indexer.
	go func() {
		t := time.NewTicker(ix.cfg.StaleAfter / 3)
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
				if err := ix.reg.Touch(tctx, d); err != nil && tctx.Err() == nil {
					log.WarnContext(ctx, "touch the claim", "err", err)
				}
			}
		}
	}()
	rc, info, err := ix.blob.Get(tctx, d.Name)
	if errors.Is(err, blob.ErrNotFound) {
		// Deleted (an object withdrawn) before its turn came: gone, not a
		// failure to try again.
		log.InfoContext(ctx, "archive file no longer in the store: recorded deleted")
		return ix.reg.Deleted(ctx, d.Name, "not in the store when its indexing began")
	}
	if err != nil {
		return ix.failed(ctx, log, d, fmt.Errorf("read %s: %w", d.Name, err), false)
	}
	lines := &cdx.Sorter{Dir: ix.cfg.WorkDir, SpillBytes: ix.cfg.SpillBytes}
	defer lines.Close()
	add := func(e cdx.Entry) error {
		if err := tctx.Err(); err != nil {
			return fmt.Errorf("indexing took longer than INDEXER_TASK_TIMEOUT (%s): %w", ix.cfg.TaskTimeout, err)
		}
		return lines.Add(e.String())
	}
	var ferr error
	if f, ok := rc.(*os.File); ok && ix.fileWorkers() > 1 {
		// A local file: its members are read in parallel spans. (A
		// bucket's object is read as a stream: a range request per read
		// would cost more than it gains.)
		_, ferr = cdx.IndexAt(deadlineReaderAt{tctx, f}, info.Size, events.CDXFileName(d.Name), ix.fileWorkers(), add)
	} else {
		_, ferr = cdx.Index(deadlineReader{tctx, rc}, events.CDXFileName(d.Name), add)
	}
	rc.Close()
	if ferr != nil && (ctx.Err() != nil || !isFileFault(ferr)) {
		// The deadline is the file's (it is too slow to index whole);
		// a read error may pass, or be the store's outage.
		return ix.failed(ctx, log, d, ferr, errors.Is(ferr, errTaskDeadline) || errors.Is(ferr, context.DeadlineExceeded))
	}
	out, err := os.CreateTemp(ix.cfg.WorkDir, "cdx-out-*")
	if err != nil {
		return fmt.Errorf("CDX output of %s: %w", d.Name, err)
	}
	_ = os.Remove(out.Name())
	defer out.Close()
	bw := bufio.NewWriterSize(out, 1<<20)
	bw.WriteString(cdx.Header + "\n")
	if _, err := lines.WriteTo(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("CDX output of %s: %w", d.Name, err)
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("CDX output of %s: %w", d.Name, err)
	}
	output := fmt.Sprintf("%s%s/%d.cdx", ix.cfg.OutputPrefix, d.Name, d.Attempt)
	if _, err := ix.blob.Put(ctx, output, out, map[string]string{"content-type": "text/plain"}); err != nil {
		return fmt.Errorf("write CDX of %s: %w", d.Name, err)
	}
	reason := ""
	if ferr != nil {
		reason = ferr.Error()
		log.WarnContext(ctx, "archive file indexed up to a fault", "lines", lines.Lines(), "reason", reason)
	} else {
		log.InfoContext(ctx, "archive file indexed", "lines", lines.Lines(), "output", output)
	}
	if err := ix.reg.Indexed(ctx, d, output, lines.Lines(), reason); err != nil {
		return err
	}
	ix.wakeUp() // announce now, and hand out a failed file again
	return nil
}

// failed handles an attempt that failed without an output: while a
// dependency is down (the store's root gone, its endpoint refusing, the
// database out) it records nothing and returns the error, so that the task
// waits, paused, and is indexed when the dependency is back; otherwise the
// file backs off, or is parked once its budget is spent.
func (ix *Indexer) failed(ctx context.Context, log *slog.Logger, d registry.Due, cause error, ofTheFile bool) error {
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the task is redelivered
	}
	if fault.IsOutage(cause) || ix.gate.Observe(ctx, cause) {
		log.WarnContext(ctx, "attempt waits: a dependency is down", "err", cause)
		return cause
	}
	log.WarnContext(ctx, "indexing failed", "err", cause)
	return ix.reg.Failed(ctx, d, cause, ofTheFile)
}

// deadlineReader fails reads once its context ends, so that no file, of
// whatever records, outlasts the task's deadline.
// fileWorkers is how many cores one file is indexed on.
func (ix *Indexer) fileWorkers() int {
	if ix.cfg.FileWorkers > 0 {
		return ix.cfg.FileWorkers
	}
	return max(1, runtime.GOMAXPROCS(0)/max(1, ix.cfg.Concurrency))
}

// deadlineReaderAt is deadlineReader for reads at offsets.
type deadlineReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (d deadlineReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := d.ctx.Err(); err != nil {
		return 0, errTaskDeadline
	}
	return d.r.ReadAt(p, off)
}

type deadlineReader struct {
	ctx context.Context
	r   io.Reader
}

func (d deadlineReader) Read(p []byte) (int, error) {
	if err := d.ctx.Err(); err != nil {
		return 0, errTaskDeadline
	}
	return d.r.Read(p)
}

var errTaskDeadline = errors.New("indexing took longer than INDEXER_TASK_TIMEOUT")

// isFileFault reports whether err is a fault of the archive file (indexed
// up to it, the output recorded with the reason) rather than of the task
// (the deadline): a task fault records no output.
func isFileFault(err error) bool {
	var fe *warc.FormatError
	return errors.As(err, &fe) && !errors.Is(err, errTaskDeadline)
}

// Handler serves GET /v1/index/status, GET /v1/index/history?file=KEY and
// the work kit's routes (a file retried, released, requeued or skipped:
// pkg/work).
func (ix *Indexer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/index/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := ix.reg.Status(r.Context())
		if err != nil {
			ix.log.Error("index status", "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "reading the index status failed"})
			return
		}
		reply.JSON(w, http.StatusOK, st)
	})
	// A file's story as an operator follows it (the dashboard).
	mux.HandleFunc("GET /v1/index/history", service.HistoryHandler(ix.log, "file", registry.ErrUnknown, ix.reg.History))
	// The operator's work: files found and acted on with the work kit.
	ix.reg.Work(ix.wakeUp).Handle(mux, ix.log)
	return work.MarkRoutes(httpauth.RoutesOf(mux))
}
