// Package auditor is the auditor service (bit-integrity-and-workman.txt): it
// keeps the content index and audit log from archive object events,
// schedules every stored object once per cycle (low priority, spread evenly
// over the cycle), takes on-demand checks (high priority), and runs the
// bit-integrity checks through the worker manager.
package auditor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
	"github.com/archivist/archivist/services/auditor/replica"
	"github.com/archivist/archivist/services/auditor/workman"
)

// Config is the auditor's configuration.
type Config struct {
	// Workman tunes the worker manager.
	Workman workman.Config
	// Cycle is how often every object is checked.
	Cycle time.Duration `env:"AUDITOR_CYCLE, default=720h"`
	// RetryDelay is the table's "retry later" (the spec's 5 minutes).
	RetryDelay time.Duration `env:"AUDITOR_RETRY_DELAY, default=5m"`
	// ScheduleTick is how often due objects are queued.
	ScheduleTick time.Duration `env:"AUDITOR_SCHEDULE_TICK, default=1m"`
	// RequeueAfter is how long a queued check may stay undone before the
	// schedule, rebuilt from PostgreSQL, queues it again (a lost message).
	RequeueAfter time.Duration `env:"AUDITOR_REQUEUE_AFTER, default=6h"`
	// HTTPAddr serves status and on-demand checks.
	HTTPAddr string `env:"AUDITOR_HTTP_ADDR, default=:8082"`
	// MinSpacePrefix is the shortest space (key prefix) an on-demand check
	// may name.
	MinSpacePrefix int `env:"AUDITOR_MIN_SPACE_PREFIX, default=3"`
	// MaxOnDemand is the most objects one on-demand check may queue.
	MaxOnDemand int `env:"AUDITOR_MAX_ON_DEMAND, default=10000"`
	// ReconcilePrefix is the part of the blob store the archive's objects
	// live in, which the reconciliation sweeps against the schedule.
	ReconcilePrefix string `env:"AUDITOR_RECONCILE_PREFIX, default=objects/"`
	// ReconcileTick is how often the reconciliation compares the next page
	// (ReconcilePage objects) of the store with the schedule.
	ReconcileTick time.Duration `env:"AUDITOR_RECONCILE_TICK, default=10s"`
	// ReconcilePage is how many store objects one step compares.
	ReconcilePage int `env:"AUDITOR_RECONCILE_PAGE, default=1000"`
	// SecondaryBlobURL is a second copy of the archive, if any: content gone
	// sour that it still holds is internally resolvable.
	SecondaryBlobURL string `env:"AUDITOR_SECONDARY_BLOB_URL"`
	// SecondaryS3AccessKeyID and SecondaryS3SecretAccessKey are the second
	// copy's S3 credentials (another provider's, say); empty, an S3 second
	// copy uses the environment's (the primary's, or a web identity).
	SecondaryS3AccessKeyID     string `env:"AUDITOR_SECONDARY_S3_ACCESS_KEY_ID"`
	SecondaryS3SecretAccessKey string `env:"AUDITOR_SECONDARY_S3_SECRET_ACCESS_KEY"`
	// Replicate has the auditor write the second copy: every recorded
	// object copied there, every deleted one deleted there (on by default
	// where there is a second copy).
	Replicate bool `env:"AUDITOR_REPLICATE, default=true"`
	// SecondaryCycle is how often the second copy's own audit checks every
	// object of the content index there (0: AUDITOR_CYCLE).
	SecondaryCycle time.Duration `env:"AUDITOR_SECONDARY_CYCLE"`
	// SecondaryCheck is how it checks a file the copy holds: "checksum"
	// (the store's stored SHA-256, no bytes read, where it keeps one) or
	// "read" (every byte).
	SecondaryCheck string `env:"AUDITOR_SECONDARY_CHECK, default=checksum"`
	// BitLogRetention is how long the bit log keeps each check; older ones
	// are summed by day and outcome (auditor.bit_log_summary) and deleted
	// (0: kept for ever).
	BitLogRetention time.Duration `env:"AUDITOR_BIT_LOG_RETENTION, default=8760h"`
	// AutoRepair are the key prefixes (comma-separated) whose internally
	// resolvable tasks are repaired at once, without an operator's
	// confirmation ("": none; "objects/": every ingested object).
	AutoRepair []string `env:"AUDITOR_AUTO_REPAIR"`
}

// Definition is the auditor service.
func Definition() service.Definition {
	return service.Definition{
		Name:      "auditor",
		Summary:   "checks every stored object's bits against the storage provider, the content index and the audit log",
		Schemas:   []store.Schema{migrations.Schema},
		NeedsDB:   true,
		NeedsBus:  true,
		NeedsBlob: true,
		Run:       service.Configured(run),
		Config:    new(Config),
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	var secondary blob.Store
	if cfg.SecondaryBlobURL != "" {
		var err error
		sc := blob.Config{URL: cfg.SecondaryBlobURL, S3AccessKeyID: cfg.SecondaryS3AccessKeyID, S3SecretAccessKey: cfg.SecondaryS3SecretAccessKey}
		if sc.S3AccessKeyID == "" && sc.S3SecretAccessKey == "" {
			sc.S3AccessKeyID, sc.S3SecretAccessKey = os.Getenv("S3_ACCESS_KEY_ID"), os.Getenv("S3_SECRET_ACCESS_KEY")
		}
		if secondary, err = blob.Open(ctx, sc); err != nil {
			return fmt.Errorf("secondary blob store: %w", err)
		}
	}
	a := New(env.Bus, env.DB, env.Blob, secondary, cfg, env.Log)
	a.SetGate(env.Gate)
	env.ReadGauges([]service.Gauge{
		{Name: "archivist_audit_objects", Help: "Objects the auditor knows."},
		{Name: "archivist_audit_checked_this_cycle", Help: "Objects checked within the audit cycle (AUDITOR_CYCLE)."},
		{Name: "archivist_audit_parked", Help: "Objects whose check failed three times (archivist audit parked)."},
		{Name: "archivist_audit_open_resolutions", Help: "Open resolution tasks by kind.", Labels: []string{"kind"}},
		{Name: "archivist_audit_failures_this_cycle", Help: "Checks of the cycle by failing outcome row.", Labels: []string{"row"}},
	}, func(ctx context.Context) (service.Readings, error) {
		st, err := a.Status(ctx)
		if err != nil {
			return nil, err
		}
		r := service.Readings{
			"archivist_audit_objects":            {service.Read(float64(st.Objects))},
			"archivist_audit_checked_this_cycle": {service.Read(float64(st.CheckedThisCycle))},
			"archivist_audit_parked":             {service.Read(float64(st.Parked))},
		}
		for kind, n := range st.OpenResolutions {
			r["archivist_audit_open_resolutions"] = append(r["archivist_audit_open_resolutions"], service.Read(float64(n), kind))
		}
		for row, n := range st.FailuresByRow {
			r["archivist_audit_failures_this_cycle"] = append(r["archivist_audit_failures_this_cycle"], service.Read(float64(n), row))
		}
		return r, nil
	})
	objects, err := bus.Consume(ctx, env.Bus, events.AuditorRecorded, a.Object, bus.WithConcurrency(4))
	if err != nil {
		return err
	}
	deletions, err := bus.Consume(ctx, env.Bus, events.AuditorDeleted, a.Deleted, bus.WithConcurrency(4))
	if err != nil {
		return errors.Join(err, objects.Stop(context.Background()))
	}
	stoppers := []func(context.Context) error{objects.Stop, deletions.Stop}
	var loops []service.Loop
	if secondary != nil && cfg.Replicate {
		// The second copy, written: a copy per recorded object, a deletion
		// per deleted one (replica).
		rep := replica.New(env.DB, env.Blob, secondary, env.Metrics, env.Log)
		copies, err := bus.Consume(ctx, env.Bus, events.AuditorReplicate, rep.Recorded, bus.WithConcurrency(8))
		if err != nil {
			return errors.Join(err, objects.Stop(context.Background()), deletions.Stop(context.Background()))
		}
		uncopies, err := bus.Consume(ctx, env.Bus, events.AuditorUnreplicate, rep.Deleted, bus.WithConcurrency(4))
		if err != nil {
			return errors.Join(err, objects.Stop(context.Background()), deletions.Stop(context.Background()), copies.Stop(context.Background()))
		}
		stoppers = append(stoppers, copies.Stop, uncopies.Stop)
		env.ReadGauges(replica.Gauges, func(ctx context.Context) (service.Readings, error) { return replica.Lag(ctx, env.Bus) })
		// The second copy, audited: a cycle of its own (the leader's).
		mode := replica.CheckMode(cfg.SecondaryCheck)
		if mode != replica.ReadCheck && mode != replica.ChecksumCheck {
			return fmt.Errorf("AUDITOR_SECONDARY_CHECK %q: read or checksum", cfg.SecondaryCheck)
		}
		copyAudit := &replica.Auditor{Replicator: rep, Cycle: cmp.Or(cfg.SecondaryCycle, cfg.Cycle), Mode: mode}
		a.copyAudit = copyAudit
		loops = append(loops, env.AsLeader("auditor.second-copy", service.Every(cfg.ScheduleTick, func(ctx context.Context) {
			if _, err := copyAudit.Step(ctx, cfg.ScheduleTick); err != nil && ctx.Err() == nil {
				env.Log.WarnContext(ctx, "second copy: its audit waits (a store away?)", "err", err)
			}
		})))
	}
	m, err := workman.New(ctx, env.Bus, events.AuditorHigh, events.AuditorLow, a.Task, cfg.Workman, workman.Hooks{}, a.Failures(), env.Log)
	if err != nil {
		return errors.Join(err, objects.Stop(context.Background()))
	}
	// The manager and the schedule stop when the API does (also when it
	// fails to start).
	// The schedule runs in one replica at a time (the leader); every
	// replica checks.
	schedule := env.AsLeader("auditor.schedule", func(ctx context.Context) error { a.Schedule(ctx); return nil })
	a.reconciled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archivist_audit_reconciled_total",
		Help: "What the reconciliation of the blob store against the schedule fixed: unscheduled (recorded, scheduled again), unrecorded (queued for capture), missing (gone from the store, checked now), deleted (unscheduled).",
	}, []string{"kind"})
	env.Metrics.MustRegister(a.reconciled)
	a.checks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archivist_audit_checks_total",
		Help: "Checks completed, by the outcome table's row (11: the object was deleted; nothing to do).",
	}, []string{"row"})
	env.Metrics.MustRegister(a.checks)
	reconcile := env.AsLeader("auditor.reconcile", service.Every(cfg.ReconcileTick, a.reconcileStep))
	trim := env.AsLeader("auditor.retention", service.Every(time.Hour, a.trimStep))
	repair := env.AsLeader("auditor.repair", service.Every(cfg.ScheduleTick, a.autoRepair))
	loops = append(loops, m.Run, schedule, reconcile, trim, repair)
	return env.Serve(ctx, "audit API", cfg.HTTPAddr, a.Handler(), loops, stoppers...)
}

// Auditor is the auditor's logic on its dependencies.
type Auditor struct {
	bus     *bus.Bus
	db      *pgxpool.Pool
	blob    blob.Store
	checker *integrity.Checker
	records *integrity.Records
	cfg     Config
	log     *slog.Logger
	// gate pauses the schedule while a dependency is down (nil: never).
	gate *fault.Gate
	// reconciled counts what the reconciliation fixed, by kind.
	reconciled *prometheus.CounterVec
	// checks counts the completed checks by outcome row (nil: none).
	checks *prometheus.CounterVec
	// copyAudit is the second copy's own audit (nil: no second copy).
	copyAudit *replica.Auditor
}

// SetGate has the auditor's loops pause while gate is closed, and tell an
// outage from a failure of the work.
func (a *Auditor) SetGate(g *fault.Gate) { a.gate = g }

// New returns an auditor.
func New(b *bus.Bus, db *pgxpool.Pool, bs, secondary blob.Store, cfg Config, log *slog.Logger) *Auditor {
	return &Auditor{bus: b, db: db, blob: bs, checker: integrity.New(db, bs, secondary), records: integrity.NewRecords(db, cfg.Cycle, log), cfg: cfg, log: log}
}

// Failures is the worker manager's failure store: counts in PostgreSQL, and
// an object whose task failed its last time parked on the schedule.
func (a *Auditor) Failures() workman.Failures { return taskFailures{a.db} }

// Object keeps the content index and audit log from an archive event.
func (a *Auditor) Object(ctx context.Context, m *bus.Message[events.ObjectRecorded]) error {
	return a.records.Recorded(ctx, m.Envelope.ID, m.Event)
}

// Deleted records a deletion in the audit log.
func (a *Auditor) Deleted(ctx context.Context, m *bus.Message[events.ObjectDeleted]) error {
	return a.records.Deleted(ctx, m.Envelope.ID, m.Event)
}

// Task runs one bit-integrity check.
func (a *Auditor) Task(ctx context.Context, m *bus.Message[events.AuditTask]) error {
	attempt := workman.Attempt(ctx)
	if attempt == 0 {
		attempt = int(m.Metadata.NumDelivered)
	}
	res, err := a.checker.Check(ctx, m.Event.Object, m.Event.Light, attempt, events.AuditMaxAttempts)
	if errors.Is(err, integrity.ErrRetryLater) {
		a.log.InfoContext(ctx, "check: retry later", "object", m.Event.Object, "row", res.Row.No, "attempt", attempt)
		return bus.RetryAfter(a.cfg.RetryDelay)
	}
	if err != nil {
		return err
	}
	if res.ProviderChecksumErr != nil {
		a.log.WarnContext(ctx, "check: the store's own checksum could not be added", "object", m.Event.Object, "err", res.ProviderChecksumErr)
	}
	if a.checks != nil {
		a.checks.WithLabelValues(strconv.Itoa(res.Row.No)).Inc()
	}
	if res.Row.No == 11 {
		a.log.InfoContext(ctx, "checked: row 11, the object was deleted; nothing to do", "object", m.Event.Object)
	} else {
		a.log.DebugContext(ctx, "checked", "object", m.Event.Object, "row", res.Row.No, "matched", res.Matched)
	}
	return nil
}

// reconcileStep compares one page of the store with the schedule, once the
// dependencies answer, and logs what it fixed.
func (a *Auditor) reconcileStep(ctx context.Context) {
	if a.gate.Wait(ctx) != nil {
		return
	}
	r, err := a.Reconcile(ctx, max(a.cfg.ReconcilePage, 1))
	switch {
	case err != nil && ctx.Err() == nil:
		a.log.ErrorContext(ctx, "reconcile the store with the schedule", "err", err)
	case r.Unscheduled+r.Unrecorded+r.Missing+r.Deleted > 0:
		a.log.WarnContext(ctx, "reconciled the store with the schedule", "unscheduled", r.Unscheduled, "unrecorded", r.Unrecorded,
			"missing", r.Missing, "deleted", r.Deleted, "compared", r.Compared)
	}
}

// Schedule queues due checks every ScheduleTick, and re-queues checks that
// were queued but never done, until ctx ends.
func (a *Auditor) Schedule(ctx context.Context) {
	t := time.NewTicker(a.cfg.ScheduleTick)
	defer t.Stop()
	for {
		if a.gate.Wait(ctx) != nil {
			return
		}
		if n, err := a.QueueDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			a.log.ErrorContext(ctx, "queue due checks", "err", err)
		} else if n > 0 {
			a.log.InfoContext(ctx, "queued scheduled checks", "objects", n)
		}
		if n, err := a.ProcessAuditQueue(ctx, 100); err != nil && ctx.Err() == nil {
			a.log.ErrorContext(ctx, "process the audit queue", "err", err)
		} else if n > 0 {
			a.log.InfoContext(ctx, "audit queue processed", "objects", n)
		}
		if n, err := a.Requeue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			a.log.ErrorContext(ctx, "requeue lost checks", "err", err)
		} else if n > 0 {
			a.log.WarnContext(ctx, "re-queued checks whose tasks were lost", "objects", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ProcessAuditQueue works up to limit entries of the audit queue (rows 7,
// 9 and 10 of the outcome table: an object the audit records lost or never
// captured): the storage provider's object, with its sha256, is captured
// into the content index and the audit log as an event would have been,
// and a check of it is queued to confirm; an object no longer at the
// provider is marked gone. It returns how many entries it worked.
//
// It runs in the leader only (auditor.schedule), so an entry is read
// without a lock and no transaction is held while it is worked: the
// capture reads the blob store and takes connections of its own, and
// holding one across it let the capture wait for a connection only it
// could free (TestAuditQueueOnOneConnection). Working an entry twice, at a
// change of leader, records it once (the capture's source is the entry).
func (a *Auditor) ProcessAuditQueue(ctx context.Context, limit int) (int, error) {
	n := 0
	for n < limit {
		var id int64
		var object string
		err := a.db.QueryRow(ctx, `SELECT id, object FROM auditor.audit_queue
			WHERE NOT done AND parked_at IS NULL AND next_attempt_at <= now()
			ORDER BY id LIMIT 1`).Scan(&id, &object)
		if errors.Is(err, pgx.ErrNoRows) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		outcome, failed := a.capture(ctx, id, object)
		if failed == nil {
			_, err = a.db.Exec(ctx, `UPDATE auditor.audit_queue SET done = true, outcome = $2, done_at = now() WHERE id = $1 AND NOT done`, id, outcome)
			if err != nil {
				return n, fmt.Errorf("audit queue entry %d (%s): %w", id, object, err)
			}
			n++
			continue
		}
		failed = fmt.Errorf("audit queue entry %d (%s): %w", id, object, failed)
		if fault.IsOutage(failed) || a.gate.Observe(ctx, failed) || ctx.Err() != nil {
			return n, failed // an outage: nothing counted, the loop waits
		}
		// The entry fails alone: it backs off, and the queue goes on.
		if rerr := a.queueEntryFailed(ctx, id, failed); rerr != nil {
			return n, rerr
		}
		a.log.WarnContext(ctx, "audit queue entry failed", "id", id, "object", object, "err", failed)
		n++
	}
	return n, nil
}

// auditQueuePolicy bounds an audit-queue entry that keeps failing.
var auditQueuePolicy = fault.Policy{Base: time.Minute, Max: time.Hour, Attempts: 5, Budget: 24 * time.Hour}

// queueEntryFailed records a failure of audit-queue entry id: it backs off,
// or is parked with its reason (`archivist audit status` counts it).
func (a *Auditor) queueEntryFailed(ctx context.Context, id int64, cause error) error {
	return pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		_, err := queueFailures.Fail(ctx, tx, id, auditQueuePolicy, cause)
		return err
	})
}

// queueFailures and repairFailures are the failure-model columns of the
// audit queue and of the internal repairs.
var (
	queueFailures = work.Failures{Table: "auditor.audit_queue", Key: "id",
		Count: "failures", FirstFailedAt: "first_failed_at", NextAt: "next_attempt_at", Error: "last_error", ParkedAt: "parked_at"}
	repairFailures = work.Failures{Table: "auditor.resolution_tasks", Key: "id",
		Count: "repair_failures", FirstFailedAt: "repair_first_failed_at", NextAt: "repair_next_at", Error: "repair_error", ParkedAt: "repair_parked_at"}
)

// capture records the provider's object for audit queue entry id and
// queues a check of it; "gone" if the provider no longer has it. Only what
// the archive has no record of is captured: an object whose content index
// holds another checksum is "disputed", and an operator decides (an
// externally resolvable task), for bytes that differ from the record are
// as likely rot as an update, and capturing them would bless rot as the
// truth.
func (a *Auditor) capture(ctx context.Context, id int64, object string) (string, error) {
	info, err := a.blob.Stat(ctx, object)
	if errors.Is(err, blob.ErrNotFound) {
		return "gone", nil
	}
	if err != nil {
		return "", err
	}
	rc, _, err := a.blob.Get(ctx, object)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", object, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	var logged bool
	var indexed *string
	if err := a.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auditor.audit_log WHERE object = $1),
		(SELECT checksum FROM auditor.content_index WHERE object = $1)`, object).Scan(&logged, &indexed); err != nil {
		return "", err
	}
	if indexed != nil && *indexed != sum {
		reason := fmt.Sprintf("the provider's bytes (sha256 %s) differ from the content index (%s): not captured; restore the object or record its update", sum, *indexed)
		if _, err := a.db.Exec(ctx, `INSERT INTO auditor.resolution_tasks (object, kind, reason, row_no)
			SELECT $1, 'external', $2, coalesce((SELECT row_no FROM auditor.audit_queue WHERE id = $3), 0)
			ON CONFLICT (object, kind, row_no) WHERE state = 'open' DO NOTHING`, object, reason, id); err != nil {
			return "", fmt.Errorf("resolution task for %s: %w", object, err)
		}
		a.log.WarnContext(ctx, "audit queue: not captured, the provider's bytes differ from the record", "object", object, "sha256", sum, "indexed", *indexed)
		return "disputed", nil
	}
	if err := a.records.Captured(ctx, id, &events.ObjectRecorded{Object: object, SHA256: sum, Size: info.Size,
		Properties: info.Properties, Update: logged}); err != nil {
		return "", err
	}
	if err := a.checkChanged(ctx, object, fmt.Sprintf("captured:%d", id)); err != nil {
		return "", fmt.Errorf("queue the check of %s: %w", object, err)
	}
	return "captured", nil
}
