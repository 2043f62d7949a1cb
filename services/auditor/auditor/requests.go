package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/reply"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/replica"
)

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
	return a.checkNow(ctx, object, space, light, "")
}

// checkChanged queues a high-priority check of object because cause (the
// audit-queue entry that captured it, the repair or close of a resolution
// task, an operator's action) changed its record or its copy. The task's id
// names the cause, not the object's last check: a check asked before the
// change may still be waiting or running, having looked before it, and must
// not stand for this one, as it did when both ids named the last check and
// JetStream dropped the second within its duplicate window (the object then
// kept the failure its stale check recorded, never checked again: the e2e
// soak's red run at 0887fb1). The same cause asked twice (an entry worked
// again at a change of leader) is one task.
func (a *Auditor) checkChanged(ctx context.Context, object, cause string) error {
	_, err := a.checkNow(ctx, object, "", false, cause)
	return err
}

// checkNow is CheckNow, its tasks' ids naming cause where one is given.
func (a *Auditor) checkNow(ctx context.Context, object, space string, light bool, cause string) (int, error) {
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
	var last map[string]time.Time
	if cause == "" { // a change's check is named by its cause, not by the last check
		var err error
		if last, err = a.lastChecks(ctx, keys); err != nil {
			return 0, err
		}
	}
	var out []bus.Outgoing
	for _, o := range keys {
		env, err := events.New(a.bus.Producer(), &events.AuditTask{Object: o, Reason: "on-demand", Light: light})
		if err != nil {
			return 0, err
		}
		switch at := last[o]; {
		case cause != "":
			env.ID = fmt.Sprintf("changed:%s:%t:%s", cause, light, o)
		case at.IsZero():
			env.ID = fmt.Sprintf("on-demand:%t:%s:never", light, o)
		default:
			env.ID = fmt.Sprintf("on-demand:%t:%s:%d", light, o, at.UnixMicro())
		}
		out = append(out, bus.Outgoing{Subject: events.SubjectAuditTaskHigh, Envelope: env})
	}
	return len(out), a.bus.PublishBatch(ctx, out)
}

// lastChecks is when each of objects was last checked (none where never).
func (a *Auditor) lastChecks(ctx context.Context, objects []string) (map[string]time.Time, error) {
	last := map[string]time.Time{}
	rows, err := a.db.Query(ctx, `SELECT object, checked_at FROM auditor.schedule WHERE object = ANY($1) AND checked_at IS NOT NULL`, objects)
	if err != nil {
		return nil, fmt.Errorf("last checks: %w", err)
	}
	for rows.Next() {
		var o string
		var at time.Time
		if err := rows.Scan(&o, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("last checks: %w", err)
		}
		last[o] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("last checks: %w", err)
	}
	return last, nil
}

// replyRead answers a read: v, or a 500 saying what could not be read (the
// error goes to the log, not to the client).
func (a *Auditor) replyRead(w http.ResponseWriter, what string, v any, err error) {
	if err != nil {
		a.log.Error("read "+what, "err", err)
		reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "reading the " + what + " failed"})
		return
	}
	reply.JSON(w, http.StatusOK, v)
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
	if err := a.checkChanged(ctx, object, fmt.Sprintf("closed:%d", id)); err != nil {
		return true, fmt.Errorf("resolution task %d closed; queue the check of %s: %w", id, object, err)
	}
	return true, nil
}

// Repair resolves an internally resolvable task (integrity.Checker.Repair)
// and queues a high-priority check of its object, which verifies it.
func (a *Auditor) Repair(ctx context.Context, task int64) (*integrity.Repaired, error) {
	res, err := a.checker.Repair(ctx, task)
	if err != nil {
		return nil, err
	}
	a.log.WarnContext(ctx, "audit: repaired", "task", task, "object", res.Object, "row", res.Row, "action", res.Action)
	if err := a.checkChanged(ctx, res.Object, fmt.Sprintf("repaired:%d", task)); err != nil {
		return res, fmt.Errorf("repaired %s; queue its check: %w", res.Object, err)
	}
	return res, nil
}

// autoRepair repairs the open internally resolvable tasks of the objects
// under AUDITOR_AUTO_REPAIR's prefixes, a page at a time, lowest first but
// for those waiting out a failed repair's backoff or parked. A repair that
// fails for a cause of the task's (its secondary copy gone sour too, no
// record left to repair to) is recorded on it under repairPolicy; an
// outage of a dependency is not (the gate pauses).
func (a *Auditor) autoRepair(ctx context.Context) {
	if len(a.cfg.AutoRepair) == 0 || a.gate.Wait(ctx) != nil {
		return
	}
	rows, err := a.db.Query(ctx, `SELECT id FROM auditor.resolution_tasks WHERE state = 'open' AND kind = 'internal' AND row_no IN (2, 6)
		AND repair_parked_at IS NULL AND (repair_next_at IS NULL OR repair_next_at <= now())
		AND object LIKE ANY (SELECT replace(replace(replace(p, '\', '\\'), '%', '\%'), '_', '\_') || '%' FROM unnest($1::text[]) p)
		ORDER BY id LIMIT 16`, a.cfg.AutoRepair)
	if err != nil {
		if ctx.Err() == nil && !a.gate.Observe(ctx, err) {
			a.log.ErrorContext(ctx, "audit: list the tasks to repair", "err", err)
		}
		return
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return
	}
	for _, id := range ids {
		_, err := a.Repair(ctx, id)
		if err == nil || ctx.Err() != nil {
			continue
		}
		if fault.IsOutage(err) || a.gate.Observe(ctx, err) {
			return // not the task's fault: tried again once the dependency answers
		}
		parked, rerr := a.repairFailed(ctx, id, err)
		if rerr != nil {
			a.log.ErrorContext(ctx, "audit: record a failed repair", "task", id, "err", rerr)
		}
		if parked {
			a.log.ErrorContext(ctx, "audit: automatic repair parked; an operator decides (archivist audit repair TASK)", "task", id, "err", err)
		} else {
			a.log.WarnContext(ctx, "audit: automatic repair failed; tried again after a backoff", "task", id, "err", err)
		}
	}
}

// repairPolicy bounds the automatic repairs of one task: a repair reads
// the object's whole second copy, so a task that cannot be repaired is not
// tried again every minute.
var repairPolicy = fault.Policy{Base: 5 * time.Minute, Max: 6 * time.Hour, Attempts: 5, Budget: 24 * time.Hour}

// repairFailed records a failed automatic repair of task: its backoff, or
// parked with its reason (at once for a permanent cause).
func (a *Auditor) repairFailed(ctx context.Context, task int64, cause error) (parked bool, err error) {
	err = pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		d, err := repairFailures.Fail(ctx, tx, task, repairPolicy, cause)
		parked = d.Park
		return err
	})
	if err != nil {
		return false, fmt.Errorf("resolution task %d: %w", task, err)
	}
	return parked, nil
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
	// RepairsParked counts open resolution tasks whose automatic repair
	// kept failing (or cannot succeed), each with its reason: an operator
	// decides (archivist audit repair TASK).
	RepairsParked int64 `json:"repairs_parked"`
	// NoProviderChecksum counts objects the store could give no checksum
	// of its own (an S3 object stored without one, beyond 5 GiB): their
	// audits compare content, index and log alone.
	NoProviderChecksum int64 `json:"no_provider_checksum"`
	// CycleEnds is when the primary copy's cycle ends: the last object of
	// it is due then (the schedule spreads every object over the cycle).
	CycleEnds *time.Time `json:"cycle_ends,omitempty"`
	// SecondCopy is the second copy's own audit pass, where there is one.
	SecondCopy  *replica.Progress `json:"second_copy,omitempty"`
	DeadLetters int               `json:"dead_letters"`
	QueuedHigh  uint64            `json:"queued_high"`
	QueuedLow   uint64            `json:"queued_low"`
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
		(SELECT count(*) FROM auditor.provider_checksums WHERE state = 'none'),
		(SELECT count(*) FROM auditor.resolution_tasks WHERE state = 'open' AND repair_parked_at IS NOT NULL)`, since).
		Scan(&st.Objects, &st.CheckedThisCycle, &st.BitErrors, &st.AuditQueue, &st.AuditQueueParked, &st.Parked, &st.NoProviderChecksum, &st.RepairsParked)
	if err != nil {
		return st, fmt.Errorf("audit status: %w", err)
	}
	if err := a.db.QueryRow(ctx, `SELECT max(next_due) FROM auditor.schedule`).Scan(&st.CycleEnds); err != nil {
		return st, fmt.Errorf("audit status: %w", err)
	}
	if a.copyAudit != nil {
		if st.SecondCopy, err = replica.ReadProgress(ctx, a.db, a.copyAudit.Cycle); err != nil {
			return st, fmt.Errorf("audit status: %w", err)
		}
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
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "limit must be 1 to 10000", "field": "limit"})
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
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "state is open, closed or all; limit 1 to 10000"})
			return
		}
		res, err := a.Resolutions(r.Context(), state, n)
		a.replyRead(w, "resolution tasks", res, err)
	})
	mux.HandleFunc("POST /v1/audit/resolutions/{id}/close", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "the id is a number", "field": "id"})
			return
		}
		closed, err := a.CloseResolution(r.Context(), id)
		if err != nil {
			a.log.Error("close resolution task", "id", id, "err", err)
			reply.JSON(w, http.StatusServiceUnavailable, map[string]string{"error": "closing the resolution task failed; retry"})
			return
		}
		if !closed {
			reply.JSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no open resolution task %d", id)})
			return
		}
		reply.JSON(w, http.StatusOK, map[string]any{"closed": id, "check_queued": true})
	})
	mux.HandleFunc("POST /v1/audit/resolutions/{id}/repair", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "the id is a number", "field": "id"})
			return
		}
		res, err := a.Repair(r.Context(), id)
		switch {
		case errors.Is(err, integrity.ErrNotRepairable):
			reply.JSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		case err != nil:
			a.log.Error("repair", "task", id, "err", err)
			reply.JSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the repair failed; retry (the log has why)"})
		default:
			reply.JSON(w, http.StatusOK, res)
		}
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
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "invalid JSON: " + err.Error()})
			return
		}
		if (req.Object == "") == (req.Space == "") {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": "give exactly one of object and space", "field": "object"})
			return
		}
		if req.Object != "" {
			if err := blob.ValidateKey(req.Object); err != nil {
				reply.JSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "field": "object"})
				return
			}
		}
		n, err := a.CheckNow(r.Context(), req.Object, req.Space, req.Light)
		var broad *TooBroadError
		if errors.As(err, &broad) {
			reply.JSON(w, http.StatusBadRequest, map[string]string{"error": broad.Error(), "field": "space"})
			return
		}
		if err != nil {
			a.log.Error("on-demand check", "err", err)
			reply.JSON(w, http.StatusServiceUnavailable, map[string]string{"error": "queuing the checks failed; retry"})
			return
		}
		reply.JSON(w, http.StatusAccepted, map[string]int{"queued": n})
	})
	// The operator's work: requests and repairs found and acted on with
	// the work kit.
	a.Work().Handle(mux, a.log)
	return work.MarkRoutes(httpauth.RoutesOf(mux))
}
