// Package pipeline is what ingest does at each state: read a batch's
// payload into jobs, estimate, provision room, download, unpack and mint,
// store, record, notify, and report the batch. Each step is a
// daemon.Work; the transition table (package ingest) says where each
// outcome may go, and the daemons (package daemon) claim, retry and move.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
	"github.com/archivist/archivist/services/curator/ingest/fetch"
	"github.com/archivist/archivist/services/curator/ingest/identifier"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/archivist/archivist/services/curator/ingest/notify"
	"github.com/archivist/archivist/services/curator/ingest/workarea"
)

// SetGate has every daemon wait while gate is closed (a dependency down)
// and tell an outage from a failure of the batch or job.
func (g *Ingester) SetGate(gate *fault.Gate) {
	g.gate = gate
	g.daemons.SetGate(gate)
}

// Ingester runs the daemons.
type Ingester struct {
	cfg    Config
	store  *ingest.Store
	blob   blob.Store
	bus    *bus.Bus
	log    *slog.Logger
	fetch  *fetch.Client
	minter identifier.Minter
	area   *workarea.Area
	// settings are the collections' notification settings; mail delivers
	// the mails their moves queue.
	settings *notify.Store
	mail     *notify.Sender
	daemons  *daemon.Set
	// gate pauses the tidying while a dependency is down (nil: never).
	gate *fault.Gate

	// batchMu guards batches, a cache of the batch rows jobs read at
	// several steps (what a job reads of its batch never changes).
	batchMu sync.Mutex
	batches map[int64]*batchRow
}

// New prepares the daemons.
func New(cfg Config, s *ingest.Store, bs blob.Store, b *bus.Bus, log *slog.Logger) (*Ingester, error) {
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(os.TempDir(), "archivist-ingest")
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("ingest work dir: %w", err)
	}
	if _, err := ark.NormalizeShoulder(cfg.ARKPrefix); err != nil {
		return nil, fmt.Errorf("INGEST_ARK_PREFIX %q: %w", cfg.ARKPrefix, err)
	}
	numbering := identifier.Local{DB: s.DB, Shoulder: cfg.ARKPrefix, Blob: bs, Log: log}
	g := &Ingester{cfg: cfg, store: s, blob: bs, bus: b, log: log, minter: &numbering,
		area: &workarea.Area{Dir: cfg.WorkDir, MinFree: cfg.MinFreeBytes, DB: s.DB, Log: log}, settings: &notify.Store{DB: s.DB}}
	var mailer notify.Mailer = &notify.Log{Log: log}
	if cfg.SMTPAddr != "" {
		mailer = &notify.SMTP{Addr: cfg.SMTPAddr, From: cfg.MailFrom, User: cfg.SMTPUser, Password: cfg.SMTPPassword, Timeout: cfg.RequestTimeout,
			AllowPlain: cfg.SMTPPlain}
	}
	g.mail = &notify.Sender{DB: s.DB, Mailer: mailer, Log: log,
		Policy: fault.Policy{Base: cfg.Interval, Max: max(cfg.RetryMax, cfg.Interval), Attempts: cfg.MaxAttempts, Budget: cfg.RetryBudget}}
	if cfg.EZIDURL != "" {
		if err := identifier.CheckEZIDURL(cfg.EZIDURL); err != nil {
			return nil, fmt.Errorf("INGEST_EZID_URL %q: %w", cfg.EZIDURL, err)
		}
		if cfg.EZIDUser == "" || cfg.EZIDPassword == "" {
			return nil, errors.New("INGEST_EZID_URL needs INGEST_EZID_USER and INGEST_EZID_PASSWORD")
		}
		g.minter = &identifier.EZID{Local: numbering, Target: cfg.EZIDTarget,
			Client: &identifier.EZIDClient{Base: cfg.EZIDURL, User: cfg.EZIDUser, Password: cfg.EZIDPassword, HTTP: &http.Client{Timeout: cfg.RequestTimeout}}}
	}
	var err error
	g.fetch, err = fetch.New(fetch.Config{AllowedHosts: cfg.AllowedHosts, AllowPrivate: cfg.AllowPrivate, HTTPProxy: cfg.HTTPProxy,
		ResponseTimeout: cfg.ResponseTimeout, IdleTimeout: cfg.IdleTimeout, RequestTimeout: cfg.RequestTimeout,
		Retries: cfg.Retries, MaxFileBytes: cfg.MaxFileBytes, WorkDir: cfg.WorkDir, MinFreeBytes: cfg.MinFreeBytes,
		MinThroughput: cfg.MinThroughput, ThroughputWindow: cfg.ThroughputWindow})
	if err != nil {
		return nil, err
	}
	d, err := daemon.NewSet(s, daemon.SetConfig{Interval: cfg.Interval, RetryMax: cfg.RetryMax, RetryBudget: cfg.RetryBudget,
		MaxAttempts: cfg.MaxAttempts, Concurrency: cfg.Concurrency, MaxClaims: cfg.MaxClaims, StepTimeout: cfg.StepTimeout, JobTimeout: cfg.JobTimeout,
		DepositorShare: cfg.DepositorShare}, log)
	if err != nil {
		return nil, err
	}
	g.daemons = d
	d.Add(ingest.Batch, ingest.Pending, onBatch(g.confirming(g.batchPending)))
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
	go func() { service.Every(g.cfg.Interval, g.sendMail)(ctx); done <- struct{}{} }()
	for range 4 {
		<-done
	}
}

// sendMail delivers the mails due (notify.Sender), while the database
// answers.
func (g *Ingester) sendMail(ctx context.Context) {
	if g.gate.Wait(ctx) != nil {
		return
	}
	for {
		n, err := g.mail.Pass(ctx)
		if err != nil && ctx.Err() == nil && !g.gate.Observe(ctx, err) {
			g.log.ErrorContext(ctx, "ingest: mail outbox", "err", err)
		}
		if n < 16 || err != nil {
			return
		}
	}
}

// sweep reports the batches whose last job's worker died between the
// job's end and the check of its batch (Store.ReportDone), while the
// database answers: an outage closes the gate and the sweep waits on it,
// instead of logging an error every interval until it is back.
func (g *Ingester) sweep(ctx context.Context) {
	if g.gate.Wait(ctx) != nil {
		return
	}
	n, err := g.store.ReportDone(ctx)
	if err != nil && ctx.Err() == nil && !g.gate.Observe(ctx, err) {
		g.log.ErrorContext(ctx, "ingest: sweep for batches done processing", "err", err)
	}
	if n > 0 {
		g.log.InfoContext(ctx, "ingest: batches found done processing", "batches", n)
	}
}

// tidyLoop tidies the working area and cleans up batches past their
// retention, logging what it did.
func (g *Ingester) tidyLoop(ctx context.Context) {
	if g.gate.Wait(ctx) != nil {
		return
	}
	if n, err := g.area.Tidy(ctx); err != nil && ctx.Err() == nil {
		g.log.ErrorContext(ctx, "ingest: tidy the working area", "dir", g.cfg.WorkDir, "err", err)
	} else if n > 0 {
		g.log.InfoContext(ctx, "ingest: working directories removed", "jobs", n, "dir", g.cfg.WorkDir)
	}
	if g.cfg.Retention <= 0 {
		return
	}
	if n, err := g.store.Cleanup(ctx, g.cfg.Retention); err != nil && ctx.Err() == nil {
		g.log.ErrorContext(ctx, "ingest: clean up batches past their retention", "retention", g.cfg.Retention, "err", err)
	} else if n > 0 {
		g.log.InfoContext(ctx, "ingest: batches past their retention cleaned up", "batches", n, "retention", g.cfg.Retention)
	}
}

// Close releases the claims' connections (Run does it when it ends).
func (g *Ingester) Close() { g.daemons.Close() }

// containerName is a container's file in its job's directory.
const containerName = "container.zip"

// batchRow is a batch's submission, with what the pipeline makes of it.
type batchRow struct{ ingest.BatchRow }

// erc is what the job's object's kernel metadata says: the batch's
// creator and date, the job's title or else the batch's.
func (b *batchRow) erc(j *ingest.JobRow) inventory.ERC {
	return inventory.ERC{Who: b.Creator, What: firstOf(j.Title, b.Title), When: b.Date}
}

// mailed is what a mail says of the batch (its payload URL without
// credentials).
func (b *batchRow) mailed() notify.Batch {
	return notify.Batch{ID: b.ID, Submitter: b.Submitter, Profile: b.Profile, Type: b.Type, PayloadURL: ingest.RedactURL(b.PayloadURL), Title: b.Title}
}

// batch reads a batch's submission (cached: it never changes).
func (g *Ingester) batch(ctx context.Context, id int64) (*batchRow, error) {
	g.batchMu.Lock()
	b, ok := g.batches[id]
	g.batchMu.Unlock()
	if ok {
		return b, nil
	}
	row, err := ingest.BatchOf(ctx, g.store.DB, id)
	if err != nil {
		return nil, err
	}
	b = &batchRow{*row}
	g.batchMu.Lock()
	if g.batches == nil || len(g.batches) >= 256 {
		g.batches = map[int64]*batchRow{}
	}
	g.batches[id] = b
	g.batchMu.Unlock()
	return b, nil
}
