// Package auditor is the auditor service (bit-integrity-and-workman.txt): it
// keeps the content index and audit log from archive object events,
// schedules every stored object once per cycle (low priority, spread evenly
// over the cycle), takes on-demand checks (high priority), and runs the
// bit-integrity checks through the worker manager.
package auditor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
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
	}
}

func run(ctx context.Context, env *service.Env, cfg Config) error {
	var secondary blob.Store
	if cfg.SecondaryBlobURL != "" {
		var err error
		if secondary, err = blob.Open(ctx, blob.Config{URL: cfg.SecondaryBlobURL}); err != nil {
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
	reconcile := env.AsLeader("auditor.reconcile", service.Every(cfg.ReconcileTick, a.reconcileStep))
	return env.Serve(ctx, "audit API", cfg.HTTPAddr, a.Handler(), []service.Loop{m.Run, schedule, reconcile}, objects.Stop, deletions.Stop)
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
}

// SetGate has the auditor's loops pause while gate is closed, and tell an
// outage from a failure of the work.
func (a *Auditor) SetGate(g *fault.Gate) { a.gate = g }

// New returns an auditor.
func New(b *bus.Bus, db *pgxpool.Pool, bs, secondary blob.Store, cfg Config, log *slog.Logger) *Auditor {
	return &Auditor{bus: b, db: db, blob: bs, checker: integrity.New(db, bs, secondary), records: integrity.NewRecords(db, cfg.Cycle), cfg: cfg, log: log}
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
		a.log.Info("check: retry later", "object", m.Event.Object, "row", res.Row.No, "attempt", attempt)
		return bus.RetryAfter(a.cfg.RetryDelay)
	}
	if err != nil {
		return err
	}
	if res.ProviderChecksumErr != nil {
		a.log.Warn("check: the store's own checksum could not be added", "object", m.Event.Object, "err", res.ProviderChecksumErr)
	}
	a.log.Debug("checked", "object", m.Event.Object, "row", res.Row.No, "matched", res.Matched)
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
		a.log.Error("reconcile the store with the schedule", "err", err)
	case r.Unscheduled+r.Unrecorded+r.Missing+r.Deleted > 0:
		a.log.Warn("reconciled the store with the schedule", "unscheduled", r.Unscheduled, "unrecorded", r.Unrecorded,
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
			a.log.Error("queue due checks", "err", err)
		} else if n > 0 {
			a.log.Info("queued scheduled checks", "objects", n)
		}
		if n, err := a.ProcessAuditQueue(ctx, 100); err != nil && ctx.Err() == nil {
			a.log.Error("process the audit queue", "err", err)
		} else if n > 0 {
			a.log.Info("audit queue processed", "objects", n)
		}
		if n, err := a.Requeue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			a.log.Error("requeue lost checks", "err", err)
		} else if n > 0 {
			a.log.Warn("re-queued checks whose tasks were lost", "objects", n)
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
func (a *Auditor) ProcessAuditQueue(ctx context.Context, limit int) (int, error) {
	n := 0
	for n < limit {
		var id int64
		var object string
		worked := false
		var failed error
		err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `SELECT id, object FROM auditor.audit_queue
				WHERE NOT done AND parked_at IS NULL AND next_attempt_at <= now()
				ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &object)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			worked = true
			outcome, err := a.capture(ctx, id, object)
			if err != nil {
				failed = fmt.Errorf("audit queue entry %d (%s): %w", id, object, err)
				return failed
			}
			_, err = tx.Exec(ctx, `UPDATE auditor.audit_queue SET done = true, outcome = $2, done_at = now() WHERE id = $1`, id, outcome)
			return err
		})
		switch {
		case !worked:
			return n, err
		case failed != nil && !fault.IsOutage(failed) && !a.gate.Observe(ctx, failed):
			// The entry fails alone: it backs off, and the queue goes on.
			if rerr := a.queueEntryFailed(ctx, id, failed); rerr != nil {
				return n, rerr
			}
			a.log.Warn("audit queue entry failed", "id", id, "object", object, "err", failed)
			n++
			continue
		case err != nil:
			return n, err // an outage: nothing counted, the loop waits
		}
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
		var failures int
		var first *time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT failures, first_failed_at, now() FROM auditor.audit_queue WHERE id = $1 FOR UPDATE`, id).
			Scan(&failures, &first, &now); err != nil {
			return fmt.Errorf("audit queue entry %d: %w", id, err)
		}
		var firstAt time.Time
		if first != nil {
			firstAt = *first
		}
		d := auditQueuePolicy.Decide(cause, failures+1, firstAt, now)
		var parked *time.Time
		if d.Park {
			parked = &now
		}
		_, err := tx.Exec(ctx, `UPDATE auditor.audit_queue SET failures = failures + 1, first_failed_at = coalesce(first_failed_at, now()),
			next_attempt_at = $2, last_error = $3, parked_at = $4 WHERE id = $1`, id, d.RetryAt, d.Reason, parked)
		if err != nil {
			return fmt.Errorf("audit queue entry %d: %w", id, err)
		}
		return nil
	})
}

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
		a.log.Warn("audit queue: not captured, the provider's bytes differ from the record", "object", object, "sha256", sum, "indexed", *indexed)
		return "disputed", nil
	}
	if err := a.records.Captured(ctx, id, &events.ObjectRecorded{Object: object, SHA256: sum, Size: info.Size,
		Properties: info.Properties, Update: logged}); err != nil {
		return "", err
	}
	if _, err := a.CheckNow(ctx, object, "", false); err != nil {
		return "", fmt.Errorf("queue the check of %s: %w", object, err)
	}
	return "captured", nil
}

// QueueDue queues a low-priority check of every object due by now and moves
// each one's next check a cycle on. It returns how many it queued.
func (a *Auditor) QueueDue(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT object, next_due FROM auditor.schedule WHERE next_due <= $1
				ORDER BY next_due LIMIT 500 FOR UPDATE SKIP LOCKED`, now)
			if err != nil {
				return err
			}
			type due struct {
				Object string
				At     time.Time
			}
			dues, err := pgx.CollectRows(rows, pgx.RowToStructByPos[due])
			if err != nil {
				return err
			}
			var out []bus.Outgoing
			for _, d := range dues {
				env, err := a.task(d.Object, "scheduled", d.At.UTC())
				if err != nil {
					return err
				}
				out = append(out, bus.Outgoing{Subject: events.SubjectAuditTaskLow, Envelope: env})
			}
			if err := a.bus.PublishBatch(ctx, out); err != nil {
				return err
			}
			n = len(dues)
			// The next check keeps the object's place in the cycle: the
			// first due time after now, whole cycles on (it was "no earlier
			// than now", now itself for an object overdue by more than a
			// cycle: due again at once, queued twice).
			_, err = tx.Exec(ctx, `UPDATE auditor.schedule SET queued_for = next_due,
				next_due = next_due + $2::interval * (floor(extract(epoch FROM ($3::timestamptz - next_due)) / extract(epoch FROM $2::interval)) + 1)
				WHERE object = ANY ($1)`, objectsOf(dues, func(d due) string { return d.Object }), a.cfg.Cycle, now)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < 500 {
			return total, nil
		}
	}
}

// Requeue rebuilds the queue from PostgreSQL: a check queued more than
// RequeueAfter ago and not done since is queued again, unless it was parked
// since (its task failed three times: requeueing it would dead-letter it
// again every RequeueAfter, for ever).
func (a *Auditor) Requeue(ctx context.Context, now time.Time) (int, error) {
	rows, err := a.db.Query(ctx, `UPDATE auditor.schedule SET queued_for = $1
		WHERE queued_for IS NOT NULL AND queued_for < $1::timestamptz - $2::interval AND (checked_at IS NULL OR checked_at < queued_for)
			AND (parked_at IS NULL OR parked_at < queued_for)
		RETURNING object`, now, a.cfg.RequeueAfter)
	if err != nil {
		return 0, err
	}
	objects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	var out []bus.Outgoing
	for _, o := range objects {
		env, err := a.task(o, "scheduled", now.UTC())
		if err != nil {
			return 0, err
		}
		out = append(out, bus.Outgoing{Subject: events.SubjectAuditTaskLow, Envelope: env})
	}
	return len(out), a.bus.PublishBatch(ctx, out)
}

func objectsOf[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func (a *Auditor) task(object, reason string, due time.Time) (events.Envelope, error) {
	env, err := events.New(a.bus.Producer(), &events.AuditTask{Object: object, Reason: reason, Due: due})
	if err != nil {
		return env, err
	}
	if !due.IsZero() {
		env.ID = fmt.Sprintf("audit:%s:%d", object, due.UnixMicro())
	}
	return env, nil
}

// CheckNow queues high-priority checks of one object, or of every object
// under a prefix (in the blob store or the content index). It returns how
// many it queued.
func (a *Auditor) CheckNow(ctx context.Context, object, space string, light bool) (int, error) {
	max := a.cfg.MaxOnDemand
	if max <= 0 {
		max = 10000
	}
	targets := map[string]bool{}
	if object != "" {
		targets[object] = true
	}
	if space != "" {
		if len(space) < a.cfg.MinSpacePrefix {
			return 0, &TooBroadError{fmt.Sprintf("space %q is shorter than %d characters (AUDITOR_MIN_SPACE_PREFIX)", space, a.cfg.MinSpacePrefix)}
		}
		for info, err := range a.blob.List(ctx, space) {
			if err != nil {
				return 0, err
			}
			targets[info.Key] = true
			if len(targets) > max {
				return 0, &TooBroadError{fmt.Sprintf("space %q holds more than %d objects (AUDITOR_MAX_ON_DEMAND): name a narrower one", space, max)}
			}
		}
		rows, err := a.db.Query(ctx, `SELECT object FROM auditor.content_index WHERE starts_with(object, $1) LIMIT $2`, space, max+1)
		if err != nil {
			return 0, err
		}
		objs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			targets[o] = true
		}
		if len(targets) > max {
			return 0, &TooBroadError{fmt.Sprintf("space %q holds more than %d objects (AUDITOR_MAX_ON_DEMAND): name a narrower one", space, max)}
		}
	}
	// The same check asked again before the first has been done is one
	// task: its id names the object's last completed check, and JetStream
	// drops the repeat within its duplicate window. Asked again after a
	// check completed, it is a new task (an operator re-checking after a
	// repair must not be ignored).
	keys := make([]string, 0, len(targets))
	for o := range targets {
		keys = append(keys, o)
	}
	// An operator's check is also the retry of an audit-queue entry that
	// kept failing: it is due again, its failures forgotten.
	if _, err := a.db.Exec(ctx, `UPDATE auditor.audit_queue SET parked_at = NULL, failures = 0, first_failed_at = NULL,
		next_attempt_at = '-infinity' WHERE NOT done AND object = ANY($1) AND (parked_at IS NOT NULL OR failures > 0)`, keys); err != nil {
		return 0, fmt.Errorf("release audit-queue entries: %w", err)
	}
	last := map[string]time.Time{}
	rows, err := a.db.Query(ctx, `SELECT object, checked_at FROM auditor.schedule WHERE object = ANY($1) AND checked_at IS NOT NULL`, keys)
	if err != nil {
		return 0, fmt.Errorf("last checks: %w", err)
	}
	for rows.Next() {
		var o string
		var at time.Time
		if err := rows.Scan(&o, &at); err != nil {
			rows.Close()
			return 0, fmt.Errorf("last checks: %w", err)
		}
		last[o] = at
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("last checks: %w", err)
	}
	var out []bus.Outgoing
	for _, o := range keys {
		env, err := events.New(a.bus.Producer(), &events.AuditTask{Object: o, Reason: "on-demand", Light: light})
		if err != nil {
			return 0, err
		}
		env.ID = fmt.Sprintf("on-demand:%t:%s:%d", light, o, last[o].UnixMicro())
		if at, ok := last[o]; !ok || at.IsZero() {
			env.ID = fmt.Sprintf("on-demand:%t:%s:never", light, o)
		}
		out = append(out, bus.Outgoing{Subject: events.SubjectAuditTaskHigh, Envelope: env})
	}
	return len(out), a.bus.PublishBatch(ctx, out)
}

// replyRead answers a read: v, or a 500 saying what could not be read (the
// error goes to the log, not to the client).
func (a *Auditor) replyRead(w http.ResponseWriter, what string, v any, err error) {
	if err != nil {
		a.log.Error("read "+what, "err", err)
		reply(w, http.StatusInternalServerError, map[string]string{"error": "reading the " + what + " failed"})
		return
	}
	reply(w, http.StatusOK, v)
}

// ParkedObject is an object whose check failed three times.
type ParkedObject struct {
	Object   string    `json:"object"`
	ParkedAt time.Time `json:"parked_at"`
	Reason   string    `json:"reason"`
}

// Parked lists up to limit parked objects, the most recent first.
func (a *Auditor) Parked(ctx context.Context, limit int) ([]ParkedObject, error) {
	rows, err := a.db.Query(ctx, `SELECT object, parked_at, coalesce(parked_reason, '') FROM auditor.schedule
		WHERE parked_at IS NOT NULL ORDER BY parked_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("parked objects: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ParkedObject])
}

// Resolution is a resolution task: a problem for a person or a repair
// process.
type Resolution struct {
	ID        int64     `json:"id"`
	Object    string    `json:"object"`
	Kind      string    `json:"kind"`
	Reason    string    `json:"reason"`
	Row       int       `json:"row"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
}

// Resolutions lists up to limit resolution tasks in state ("open",
// "closed", or "" for both), the oldest first.
func (a *Auditor) Resolutions(ctx context.Context, state string, limit int) ([]Resolution, error) {
	rows, err := a.db.Query(ctx, `SELECT id, object, kind, reason, row_no, state, created_at FROM auditor.resolution_tasks
		WHERE $1 = '' OR state = $1 ORDER BY id LIMIT $2`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("resolution tasks: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Resolution])
}

// CloseResolution closes an open resolution task and queues a check of its
// object, so that the repair is verified; false if no such open task.
func (a *Auditor) CloseResolution(ctx context.Context, id int64) (bool, error) {
	var object string
	err := a.db.QueryRow(ctx, `UPDATE auditor.resolution_tasks SET state = 'closed' WHERE id = $1 AND state = 'open' RETURNING object`, id).Scan(&object)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("close resolution task %d: %w", id, err)
	}
	if _, err := a.CheckNow(ctx, object, "", false); err != nil {
		return true, fmt.Errorf("resolution task %d closed; queue the check of %s: %w", id, object, err)
	}
	return true, nil
}

// TooBroadError refuses an on-demand check that would queue too much.
type TooBroadError struct{ msg string }

func (e *TooBroadError) Error() string { return e.msg }

// Status is what `archivist audit status` shows.
type Status struct {
	Objects          int64            `json:"objects"`
	CheckedThisCycle int64            `json:"checked_this_cycle"`
	Cycle            string           `json:"cycle"`
	FailuresByRow    map[string]int64 `json:"failures_by_row"`
	BitErrors        int64            `json:"bit_errors"`
	OpenResolutions  map[string]int64 `json:"open_resolution_tasks"`
	AuditQueue       int64            `json:"audit_queue"`
	// AuditQueueParked counts audit-queue entries that kept failing and
	// wait for an operator (each with its last error).
	AuditQueueParked int64 `json:"audit_queue_parked"`
	// Parked counts objects whose check failed three times (`archivist
	// audit parked` lists them).
	Parked int64 `json:"parked"`
	// NoProviderChecksum counts objects the store could give no checksum
	// of its own (an S3 object stored without one, beyond 5 GiB): their
	// audits compare content, index and log alone.
	NoProviderChecksum int64  `json:"no_provider_checksum"`
	DeadLetters        int    `json:"dead_letters"`
	QueuedHigh         uint64 `json:"queued_high"`
	QueuedLow          uint64 `json:"queued_low"`
}

// Status reads the status: this cycle's checks and failures, open
// resolution tasks, the audit queue, the task queues and dead letters.
func (a *Auditor) Status(ctx context.Context) (Status, error) {
	st := Status{Cycle: a.cfg.Cycle.String(), FailuresByRow: map[string]int64{}, OpenResolutions: map[string]int64{}}
	since := time.Now().Add(-a.cfg.Cycle)
	err := a.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM auditor.schedule),
		(SELECT count(DISTINCT object) FROM auditor.bit_log WHERE at >= $1),
		(SELECT count(*) FROM auditor.bit_log WHERE at >= $1 AND bit_error),
		(SELECT count(*) FROM auditor.audit_queue WHERE NOT done AND parked_at IS NULL),
		(SELECT count(*) FROM auditor.audit_queue WHERE NOT done AND parked_at IS NOT NULL),
		(SELECT count(*) FROM auditor.schedule WHERE parked_at IS NOT NULL),
		(SELECT count(*) FROM auditor.provider_checksums WHERE state = 'none')`, since).
		Scan(&st.Objects, &st.CheckedThisCycle, &st.BitErrors, &st.AuditQueue, &st.AuditQueueParked, &st.Parked, &st.NoProviderChecksum)
	if err != nil {
		return st, fmt.Errorf("audit status: %w", err)
	}
	rows, err := a.db.Query(ctx, `SELECT row_no::text, count(*) FROM auditor.bit_log WHERE at >= $1 AND NOT success GROUP BY row_no`, since)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var k string
		var n int64
		rows.Scan(&k, &n)
		st.FailuresByRow[k] = n
	}
	rows.Close()
	rows, err = a.db.Query(ctx, `SELECT kind, count(*) FROM auditor.resolution_tasks WHERE state = 'open' GROUP BY kind`)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var k string
		var n int64
		rows.Scan(&k, &n)
		st.OpenResolutions[k] = n
	}
	rows.Close()
	dlq, err := a.bus.JetStream().Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		return st, err
	}
	info, err := dlq.Info(ctx, jetstream.WithSubjectFilter(events.SubjectDeadLetterPrefix+".AUDIT_*.>"))
	if err != nil {
		return st, err
	}
	for _, n := range info.State.Subjects {
		st.DeadLetters += int(n)
	}
	for _, q := range []struct {
		c   events.Consumer
		dst *uint64
	}{{events.AuditorHigh, &st.QueuedHigh}, {events.AuditorLow, &st.QueuedLow}} {
		cons, err := a.bus.JetStream().Consumer(ctx, q.c.Stream, q.c.Config.Durable)
		if err != nil {
			return st, err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return st, err
		}
		*q.dst = info.NumPending + uint64(info.NumAckPending)
	}
	return st, nil
}

// reply writes v as JSON with code.
func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Handler serves GET /v1/audit/status, GET /v1/audit/history?object=KEY, POST /v1/audit/check ({"object":
// KEY} or {"space": PREFIX}, optional "light"), GET /v1/audit/parked, GET
// /v1/audit/resolutions and POST /v1/audit/resolutions/{id}/close.
func (a *Auditor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audit/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := a.Status(r.Context())
		a.replyRead(w, "audit status", st, err)
	})
	limit := func(r *http.Request) (int, bool) {
		n := 100
		if v := r.URL.Query().Get("limit"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 10000 {
				return 0, false
			}
		}
		return n, true
	}
	// An object's integrity story as an operator follows it (the dashboard).
	mux.HandleFunc("GET /v1/audit/history", service.HistoryHandler(a.log, "object", ErrNoObject, a.History))
	mux.HandleFunc("GET /v1/audit/parked", func(w http.ResponseWriter, r *http.Request) {
		n, ok := limit(r)
		if !ok {
			reply(w, http.StatusBadRequest, map[string]string{"error": "limit must be 1 to 10000", "field": "limit"})
			return
		}
		p, err := a.Parked(r.Context(), n)
		a.replyRead(w, "parked objects", p, err)
	})
	mux.HandleFunc("GET /v1/audit/resolutions", func(w http.ResponseWriter, r *http.Request) {
		n, ok := limit(r)
		state := r.URL.Query().Get("state")
		if state == "" {
			state = "open"
		}
		if state == "all" {
			state = ""
		}
		if !ok || (state != "" && state != "open" && state != "closed") {
			reply(w, http.StatusBadRequest, map[string]string{"error": "state is open, closed or all; limit 1 to 10000"})
			return
		}
		res, err := a.Resolutions(r.Context(), state, n)
		a.replyRead(w, "resolution tasks", res, err)
	})
	mux.HandleFunc("POST /v1/audit/resolutions/{id}/close", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": "the id is a number", "field": "id"})
			return
		}
		closed, err := a.CloseResolution(r.Context(), id)
		if err != nil {
			a.log.Error("close resolution task", "id", id, "err", err)
			reply(w, http.StatusServiceUnavailable, map[string]string{"error": "closing the resolution task failed; retry"})
			return
		}
		if !closed {
			reply(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no open resolution task %d", id)})
			return
		}
		reply(w, http.StatusOK, map[string]any{"closed": id, "check_queued": true})
	})
	mux.HandleFunc("POST /v1/audit/check", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Object string `json:"object"`
			Space  string `json:"space"`
			Light  bool   `json:"light"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": "invalid JSON: " + err.Error()})
			return
		}
		if (req.Object == "") == (req.Space == "") {
			reply(w, http.StatusBadRequest, map[string]string{"error": "give exactly one of object and space", "field": "object"})
			return
		}
		if req.Object != "" {
			if err := blob.ValidateKey(req.Object); err != nil {
				reply(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "field": "object"})
				return
			}
		}
		n, err := a.CheckNow(r.Context(), req.Object, req.Space, req.Light)
		var broad *TooBroadError
		if errors.As(err, &broad) {
			reply(w, http.StatusBadRequest, map[string]string{"error": broad.Error(), "field": "space"})
			return
		}
		if err != nil {
			a.log.Error("on-demand check", "err", err)
			reply(w, http.StatusServiceUnavailable, map[string]string{"error": "queuing the checks failed; retry"})
			return
		}
		reply(w, http.StatusAccepted, map[string]int{"queued": n})
	})
	return mux
}
