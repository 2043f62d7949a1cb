package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"path/filepath"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
	"github.com/archivist/archivist/services/curator/ingest/notify"
	"github.com/archivist/archivist/services/curator/ingest/report"
	"github.com/jackc/pgx/v5"
)

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
	kind, url, localID, title, primary string
	files                              []ingest.File
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
		jobs = []newJob{{kind: "file", url: b.PayloadURL, title: b.Title, primary: b.Primary, files: []ingest.File{{URL: b.PayloadURL, Name: nameOf(b.PayloadURL)}}}}
	case "container":
		jobs = []newJob{{kind: "container", url: b.PayloadURL, title: b.Title, primary: b.Primary}}
	case "manifest":
		j := newJob{kind: "manifest", url: b.PayloadURL, title: b.Title, primary: b.Primary}
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
	case "batch-manifest", "manifest-of-containers":
		// A job a row (a one-file object, or a container): the manifest is checked whole first, holding
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
			src := &manifestJobs{ctx: ctx, g: g, url: b.PayloadURL, batch: id, submitter: b.Submitter, profile: b.Profile, title: b.Title,
				mode: b.Mode, containers: b.Type == "manifest-of-containers"}
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
			j := newJob{kind: "manifest", url: r.URL, localID: r.LocalID, title: firstOf(r.Title, b.Title), primary: r.Primary}
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
			rows[i] = []any{id, b.Submitter, b.Profile, j.kind, j.url, j.localID, j.title, files, j.primary, b.Mode}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"curator", "jobs"}, jobColumnsCopied, pgx.CopyFromRows(rows))
		return err
	}}, nil
}

// confirming has a batch's move to processing queue the collection's
// confirmation mail in its transaction, when its settings ask for one.
func (g *Ingester) confirming(step func(ctx context.Context, id int64) (daemon.Outcome, error)) func(ctx context.Context, id int64) (daemon.Outcome, error) {
	return func(ctx context.Context, id int64) (daemon.Outcome, error) {
		out, err := step(ctx, id)
		if err != nil || out.To != ingest.Processing {
			return out, err
		}
		b, err := g.batch(ctx, id)
		if err != nil {
			return daemon.Outcome{}, err
		}
		st, err := g.settings.Get(ctx, b.Profile)
		if err != nil || !st.Confirm || len(st.Emails) == 0 {
			return out, err
		}
		apply := out.Apply
		out.Apply = func(ctx context.Context, tx pgx.Tx) error {
			if apply != nil {
				if err := apply(ctx, tx); err != nil {
					return err
				}
			}
			var jobs int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE batch_id = $1`, id).Scan(&jobs); err != nil {
				return err
			}
			return notify.Enqueue(ctx, tx, id, "confirmation", notify.Confirmation(st.Emails, b.mailed(), jobs))
		}
		return out, nil
	}
}

// jobColumnsCopied are the columns a batch's jobs are created with.
var jobColumnsCopied = []string{"batch_id", "submitter", "profile", "kind", "payload_url", "local_id", "title", "files", "primary_ark", "submission_mode"}

// manifestJobs streams a batch manifest's rows as jobs into COPY (a
// pgx.CopyFromSource): the manifest is read by manifest.ScanCheckm as COPY asks for
// rows, one row in hand at a time.
type manifestJobs struct {
	ctx                 context.Context
	g                   *Ingester
	url, profile, title string
	submitter, mode     string
	batch               int64
	// containers: each row is a zip container (manifest-of-containers),
	// not a file.
	containers bool
	next       func() (manifest.Row, error, bool)
	stop       func()
	row        manifest.Row
	err        error
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
	if m.containers {
		// The container's declared size and digest are checked on download
		// (its files are the container's until it is unpacked).
		return []any{m.batch, m.submitter, m.profile, "container", r.URL, r.LocalID, firstOf(r.Title, m.title),
			[]ingest.File{{URL: r.URL, Name: containerName, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size}}, r.Primary, m.mode}, nil
	}
	return []any{m.batch, m.submitter, m.profile, "file", r.URL, r.LocalID, firstOf(r.Title, m.title),
		[]ingest.File{{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size}}, r.Primary, m.mode}, nil
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

// batchReport is the work of a batch in reporting (or update-reporting):
// its next report is written, kept in the blob store and on the batch, and
// sent to its callback.
func (g *Ingester) batchReport(from ingest.State) daemon.Work {
	return onBatch(func(ctx context.Context, id int64) (daemon.Outcome, error) {
		rep, callback, err := report.Write(ctx, g.store.DB, id, g.log)
		if err != nil {
			return daemon.Outcome{}, err
		}
		b, err := g.batch(ctx, id)
		if err != nil {
			return daemon.Outcome{}, err
		}
		st, err := g.settings.Get(ctx, b.Profile)
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
		// To the collection's callback and the batch's own.
		for _, cb := range notify.Callbacks(st.CallbackURL, callback) {
			if err := daemon.Fence(ctx); err != nil {
				return daemon.Outcome{}, err
			}
			if last := g.fetch.PostRetrying(ctx, cb, body); last != nil {
				detail += "; report not delivered to " + ingest.RedactURL(cb) + ": " + last.Error()
				g.log.WarnContext(ctx, "ingest: batch report not delivered", "batch", id, "err", last)
			} else {
				detail += "; report delivered"
			}
		}
		out := daemon.Outcome{To: to, Detail: detail, Set: ingest.Columns{Report: body}}
		if st.Report && len(st.Emails) > 0 {
			m := notify.ReportMail(st.Emails, b.mailed(), rep.Sequence, string(to), detail, fmt.Sprintf("reports/batch-%d-%d.json", id, rep.Sequence), body)
			out.Apply = func(ctx context.Context, tx pgx.Tx) error { return notify.Enqueue(ctx, tx, id, "report", m) }
		}
		return out, nil
	})
}
