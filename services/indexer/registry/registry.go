// Package registry is the indexer's archive-file registry in PostgreSQL:
// which files exist, which are due, and how each one's indexing went. Every
// change of a file's state is one statement or one transaction.
package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/work"
)

// Registry is the registry on PostgreSQL.
type Registry struct {
	db *pgxpool.Pool
	// transient bounds a file whose attempts fail for a cause that may pass
	// (a read error of the store, not an outage): backing off, parked only
	// once it has failed maxFailures times over the budget.
	transient fault.Policy
	// faulty bounds a file that is at fault itself (corrupt, or beyond the
	// task's deadline) or that crashed or hung its indexer: backing off,
	// parked after maxFailures (the spec's bad-reputation rule).
	faulty fault.Policy
}

// Option configures a Registry.
type Option func(*Registry)

// WithRetry sets the backoff of failed files (from base, doubling, at most
// max; defaults 30 s and 1 h) and how long a file may keep failing for a
// transient cause before it is parked (default 24 h).
func WithRetry(base, maxDelay, budget time.Duration) Option {
	return func(r *Registry) {
		r.transient.Base, r.transient.Max, r.transient.Budget = base, maxDelay, budget
		r.faulty.Base, r.faulty.Max = base, maxDelay
	}
}

// New returns the registry; a file that fails maxFailures times is parked
// (for a transient cause, only once it has also kept failing for the
// budget: WithRetry).
func New(db *pgxpool.Pool, maxFailures int, opts ...Option) *Registry {
	r := &Registry{db: db,
		transient: fault.Policy{Base: 30 * time.Second, Max: time.Hour, Attempts: maxFailures, Budget: 24 * time.Hour},
		faulty:    fault.Policy{Base: 30 * time.Second, Max: time.Hour, Attempts: maxFailures},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// KindOf says whether a key names an archive file: "warc", "arc" or "".
func KindOf(name string) string {
	n := strings.ToLower(strings.TrimSuffix(strings.ToLower(name), ".gz"))
	switch {
	case strings.HasSuffix(n, ".warc"):
		return "warc"
	case strings.HasSuffix(n, ".arc"):
		return "arc"
	}
	return ""
}

// Discover records an archive file if it is new; it reports whether it was.
func (r *Registry) Discover(ctx context.Context, name string, size int64) (bool, error) {
	kind := KindOf(name)
	if kind == "" {
		return false, nil
	}
	tag, err := r.db.Exec(ctx, `INSERT INTO indexer.files (name, kind, size) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`, name, kind, size)
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// DiscoverAll registers the archive files among keys (with their sizes)
// in one statement, and returns how many were new: a scan page's worth of
// keys costs one round trip, not one each.
func (r *Registry) DiscoverAll(ctx context.Context, keys []string, sizes []int64) (int, error) {
	var names, kinds []string
	var sz []int64
	for i, k := range keys {
		if kind := KindOf(k); kind != "" {
			names, kinds, sz = append(names, k), append(kinds, kind), append(sz, sizes[i])
		}
	}
	if len(names) == 0 {
		return 0, nil
	}
	// A file recorded deleted that the store lists again is new again.
	tag, err := r.db.Exec(ctx, `INSERT INTO indexer.files (name, kind, size)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
		ON CONFLICT (name) DO UPDATE SET status = 'new', size = EXCLUDED.size, failures = 0, last_error = '', status_at = now(),
			first_failed_at = NULL, next_attempt_at = '-infinity', output = '', lines = 0, announced = false
		WHERE indexer.files.status = 'deleted'`, names, kinds, sz)
	if err != nil {
		return 0, fmt.Errorf("discover %d files: %w", len(names), err)
	}
	return int(tag.RowsAffected()), nil
}

// Due is a file handed out for indexing.
type Due struct {
	Name    string
	Attempt int
}

// TakeDue marks up to limit due files queued (fewest failures first, then
// newest) and returns them: new files, failed files whose backoff has run
// out, and files queued for longer than stale (a lost task).
func (r *Registry) TakeDue(ctx context.Context, limit int, stale time.Duration) ([]Due, error) {
	if err := r.failStale(ctx, stale); err != nil {
		return nil, err
	}
	// Each kind of due file from an index of its own: files backing off
	// are never scanned over, however many there are.
	rows, err := r.db.Query(ctx, `WITH
		n AS (SELECT name, failures, discovered_at FROM indexer.files WHERE status = 'new'
			ORDER BY discovered_at DESC LIMIT $1 FOR UPDATE SKIP LOCKED),
		f AS (SELECT name, failures, discovered_at FROM indexer.files WHERE status = 'failed' AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED),
		q AS (SELECT name, failures, discovered_at FROM indexer.files WHERE status = 'queued' AND status_at < now() - $2::interval
			ORDER BY status_at LIMIT $1 FOR UPDATE SKIP LOCKED),
		due AS (SELECT name FROM (SELECT * FROM n UNION ALL SELECT * FROM f UNION ALL SELECT * FROM q) c
			ORDER BY failures, discovered_at DESC LIMIT $1)
		UPDATE indexer.files SET status = 'queued', status_at = now(), attempts = attempts + 1
		FROM due WHERE indexer.files.name = due.name RETURNING indexer.files.name, indexer.files.attempts`, limit, stale)
	if err != nil {
		return nil, fmt.Errorf("take due files: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Due])
}

// failStale counts an attempt that claimed its file and has not touched it
// within stale as a failure: its indexer crashed or hung (a task is bounded
// by a shorter deadline), so a file that kills or wedges every indexer is
// parked after MaxFailures instead of handed out for ever. A task merely
// waiting in the queue is handed out again free (TakeDue).
func (r *Registry) failStale(ctx context.Context, stale time.Duration) error {
	rows, err := r.db.Query(ctx, `SELECT name, attempts FROM indexer.files WHERE status = 'indexing' AND status_at < now() - $1::interval LIMIT 100`, stale)
	if err != nil {
		return fmt.Errorf("find stale attempts: %w", err)
	}
	staleOnes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Due])
	if err != nil {
		return fmt.Errorf("find stale attempts: %w", err)
	}
	for _, d := range staleOnes {
		cause := fmt.Errorf("attempt %d did not finish within %s: its indexer crashed, hung or lost the task", d.Attempt, stale)
		if err := r.fail(ctx, d, r.faulty, cause, nil, "status = 'indexing' AND status_at < now() - $3::interval", stale); err != nil {
			return err
		}
	}
	return nil
}

// fail records attempt d's failure under policy p, in one transaction
// (after before, if any): the file backs off (failed, next_attempt_at) or
// is parked with the reason. cond further restricts the row (its
// parameters from $3 on); a row no longer matching is left alone (another
// attempt took it meanwhile).
func (r *Registry) fail(ctx context.Context, d Due, p fault.Policy, cause error, before func(pgx.Tx) error, cond string, args ...any) error {
	return pgx.BeginTxFunc(ctx, r.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		where := "name = $1 AND attempts = $2"
		if cond != "" {
			where += " AND " + cond
		}
		if _, _, err := fileFailures.FailWhere(ctx, tx, p, cause, where, append([]any{d.Name, d.Attempt}, args...)...); err != nil {
			return fmt.Errorf("record failure of %s: %w", d.Name, err)
		}
		return nil
	})
}

// fileFailures are the files' failure-model columns: a failed file backs
// off (failed), a parked one waits for an operator (parked).
var fileFailures = work.Failures{Table: "indexer.files", Count: "failures", FirstFailedAt: "first_failed_at",
	NextAt: "next_attempt_at", Error: "last_error", State: "status", StateAt: "status_at", FailedState: "failed", ParkedState: "parked"}

// Claim marks a queued file as being indexed by attempt. It reports false
// when the task is stale (another attempt took the file since).
func (r *Registry) Claim(ctx context.Context, d Due) (bool, error) {
	tag, err := r.db.Exec(ctx, `UPDATE indexer.files SET status = 'indexing', status_at = now()
		WHERE name = $1 AND attempts = $2 AND status IN ('queued', 'indexing')`, d.Name, d.Attempt)
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", d.Name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Touch keeps attempt's claim of its file fresh: a file indexing with a
// live indexer is never taken for stale, however long it takes (its task
// is bounded by INDEXER_TASK_TIMEOUT); one whose indexer died is, within
// INDEXER_STALE_AFTER of its last touch.
func (r *Registry) Touch(ctx context.Context, d Due) error {
	if _, err := r.db.Exec(ctx, `UPDATE indexer.files SET status_at = now() WHERE name = $1 AND attempts = $2 AND status = 'indexing'`,
		d.Name, d.Attempt); err != nil {
		return fmt.Errorf("touch %s: %w", d.Name, err)
	}
	return nil
}

// Indexed records attempt's output as the file's: status, output and the
// announcement still to make. reason is why the file could not be indexed
// whole, or "" (then the file is indexed). A faulty file keeps its partial
// output and counts a failure (backing off; after maxFailures it is parked).
func (r *Registry) Indexed(ctx context.Context, d Due, output string, lines int64, reason string) error {
	record := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE indexer.files SET
			output = $3, lines = $4, complete = ($5 = ''), announced = false, indexed_at = now(), status_at = now(),
			last_error = $5, status = 'indexed', first_failed_at = CASE WHEN $5 = '' THEN NULL ELSE first_failed_at END,
			next_attempt_at = '-infinity'
			WHERE name = $1 AND attempts = $2`, d.Name, d.Attempt, output, lines, reason)
		if err != nil {
			return fmt.Errorf("record %s: %w", d.Name, err)
		}
		return nil
	}
	if reason == "" {
		return pgx.BeginTxFunc(ctx, r.db, pgx.TxOptions{}, record)
	}
	return r.fail(ctx, d, r.faulty, errors.New(reason), record, "")
}

// Failed records a failure that produced no output. A cause that may pass
// (a read error) backs off under the transient policy, bounded by time; a
// fault of the file itself (fault.Permanent, a deadline it outlasted)
// under the faulty one, bounded by count. An outage is the caller's to
// pause for: it is not recorded here.
func (r *Registry) Failed(ctx context.Context, d Due, cause error, ofTheFile bool) error {
	p := r.transient
	if ofTheFile {
		p = r.faulty
	}
	return r.fail(ctx, d, p, cause, nil, "")
}

// Announcement is an output whose index.cdx.ready is still to be published.
type Announcement struct {
	File, Output string
	Lines        int64
	Complete     bool
}

// Unannounced lists outputs recorded but not yet announced.
func (r *Registry) Unannounced(ctx context.Context, limit int) ([]Announcement, error) {
	rows, err := r.db.Query(ctx, `SELECT name, output, lines, complete FROM indexer.files WHERE NOT announced AND output <> '' LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Announcement])
}

// Announced marks an output announced (if it is still the file's output).
func (r *Registry) Announced(ctx context.Context, file, output string) error {
	_, err := r.db.Exec(ctx, `UPDATE indexer.files SET announced = true WHERE name = $1 AND output = $2`, file, output)
	return err
}

// Deleted records an archive file deleted from the archive (an object
// withdrawn), known or not: it is not indexed, nor handed out again, nor
// revived by an announcement of its recording that arrives late; only the
// repository scan finding it in the store again makes it new. why is kept
// as its last error.
func (r *Registry) Deleted(ctx context.Context, name, why string) error {
	kind := KindOf(name)
	if kind == "" {
		return nil
	}
	_, err := r.db.Exec(ctx, `INSERT INTO indexer.files (name, kind, size, status, last_error, next_attempt_at) VALUES ($1, $2, 0, 'deleted', $3, 'infinity')
		ON CONFLICT (name) DO UPDATE SET status = 'deleted', last_error = $3, status_at = now(), next_attempt_at = 'infinity'`, name, kind, why)
	if err != nil {
		return fmt.Errorf("deleted %s: %w", name, err)
	}
	return nil
}

// ErrUnknown is returned by Reset for a file the registry does not hold.
var ErrUnknown = errors.New("no such archive file")

// resetSQL has files (its WHERE names them) indexed again from the start.
const resetSQL = `UPDATE indexer.files SET status = 'new', failures = 0, last_error = '', status_at = now(),
	first_failed_at = NULL, next_attempt_at = '-infinity'`

// File is a registry row.
type File struct {
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Failures  int       `json:"failures"`
	LastError string    `json:"last_error,omitempty"`
	Output    string    `json:"output,omitempty"`
	Lines     int64     `json:"lines"`
	Found     time.Time `json:"discovered_at"`
}

// Get reads a file's row.
func (r *Registry) Get(ctx context.Context, name string) (File, error) {
	rows, err := r.db.Query(ctx, `SELECT name, status, failures, last_error, output, lines, discovered_at FROM indexer.files WHERE name = $1`, name)
	if err != nil {
		return File{}, err
	}
	f, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[File])
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, fmt.Errorf("%s: %w", name, ErrUnknown)
	}
	return f, err
}

// Status is the registry at a glance: files by status, the parked ones with
// their errors, and freshness.
type Status struct {
	ByStatus map[string]int64 `json:"by_status"`
	Parked   []File           `json:"parked"`
	// OldestUnindexed is when the oldest file not yet indexed was found.
	OldestUnindexed *time.Time `json:"oldest_unindexed,omitempty"`
	Lines           int64      `json:"lines"`
}

// Status reads the registry's status (at most 100 parked files listed).
func (r *Registry) Status(ctx context.Context) (Status, error) {
	st := Status{ByStatus: map[string]int64{}}
	// One snapshot: the counts and the parked list agree.
	err := pgx.BeginTxFunc(ctx, r.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT status, count(*), coalesce(sum(lines), 0) FROM indexer.files GROUP BY status`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var s string
			var n, lines int64
			if err := rows.Scan(&s, &n, &lines); err != nil {
				rows.Close()
				return err
			}
			st.ByStatus[s] = n
			if s == "indexed" {
				st.Lines = lines
			}
		}
		rows.Close()
		if err := tx.QueryRow(ctx, `SELECT min(discovered_at) FROM indexer.files WHERE status <> 'indexed'`).Scan(&st.OldestUnindexed); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT name, status, failures, last_error, output, lines, discovered_at FROM indexer.files
			WHERE status = 'parked' ORDER BY name LIMIT 100`)
		if err != nil {
			return err
		}
		st.Parked, err = pgx.CollectRows(rows, pgx.RowToStructByPos[File])
		return err
	})
	if err != nil {
		return st, fmt.Errorf("index status: %w", err)
	}
	return st, nil
}

// History is a file's story as the registry keeps it: found, its attempts
// and failures, its last error, indexed (the registry keeps a file's
// current row, not a row per attempt).
func (r *Registry) History(ctx context.Context, name string) (service.History, error) {
	h := service.History{Kind: "file", ID: name, Facts: []service.Fact{}, Events: []service.HistoryEvent{}}
	var kind, lastError, output string
	var size, lines int64
	var attempts, failures int
	var found, statusAt time.Time
	var indexedAt *time.Time
	err := r.db.QueryRow(ctx, `SELECT kind, size, discovered_at, status, status_at, attempts, failures, last_error, output, lines, indexed_at
		FROM indexer.files WHERE name = $1`, name).Scan(&kind, &size, &found, &h.State, &statusAt, &attempts, &failures, &lastError, &output, &lines, &indexedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, ErrUnknown
	} else if err != nil {
		return h, fmt.Errorf("file %s history: %w", name, err)
	}
	h.Facts = append(h.Facts, service.Fact{Name: "kind", Value: kind}, service.Fact{Name: "size", Value: fmt.Sprintf("%d bytes", size)},
		service.Fact{Name: "attempts", Value: fmt.Sprint(attempts)}, service.Fact{Name: "failures", Value: fmt.Sprint(failures)},
		service.Fact{Name: "CDX lines", Value: fmt.Sprint(lines)})
	if output != "" {
		h.Facts = append(h.Facts, service.Fact{Name: "output", Value: output})
	}
	h.Events = append(h.Events, service.HistoryEvent{At: found, What: "found", Detail: fmt.Sprintf("%s file, %d bytes", kind, size)})
	if indexedAt != nil {
		h.Events = append(h.Events, service.HistoryEvent{At: *indexedAt, What: "indexed", Detail: fmt.Sprintf("%d CDX lines in %s", lines, output)})
	}
	if indexedAt == nil || !statusAt.Equal(*indexedAt) {
		e := service.HistoryEvent{At: statusAt, What: h.State}
		if lastError != "" && (h.State == "failed" || h.State == "parked") {
			e.Detail = fmt.Sprintf("after %d failure(s): %s", failures, lastError)
		}
		h.Events = append(h.Events, e)
	}
	// The operators' actions on it (pkg/work).
	acts, err := work.History(ctx, r.db, "indexer", "index/file/"+name)
	if err != nil {
		return h, err
	}
	h.Events = append(h.Events, acts...)
	service.SortHistory(&h)
	return h, nil
}

// ScanCursor is the key the repository scan registered last ("" at the
// start of a cycle).
func (r *Registry) ScanCursor(ctx context.Context) (string, error) {
	var after string
	if err := r.db.QueryRow(ctx, `SELECT after FROM indexer.scan_cursor WHERE id = 1`).Scan(&after); err != nil {
		return "", fmt.Errorf("scan cursor: %w", err)
	}
	return after, nil
}

// SetScanCursor keeps where the repository scan stopped ("" sends the next
// page to the start); newCycle records that a cycle began.
func (r *Registry) SetScanCursor(ctx context.Context, after string, newCycle bool) error {
	q := `UPDATE indexer.scan_cursor SET after = $1 WHERE id = 1`
	if newCycle {
		q = `UPDATE indexer.scan_cursor SET after = $1, cycle_started_at = now() WHERE id = 1`
	}
	if _, err := r.db.Exec(ctx, q, after); err != nil {
		return fmt.Errorf("keep the scan cursor: %w", err)
	}
	return nil
}
