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
	var jobs []ingest.NewJob
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
		jobs = []ingest.NewJob{{Kind: "file", PayloadURL: b.PayloadURL, Title: b.Title, Primary: b.Primary, Files: []ingest.File{{URL: b.PayloadURL, Name: nameOf(b.PayloadURL)}}}}
	case "container":
		jobs = []ingest.NewJob{{Kind: "container", PayloadURL: b.PayloadURL, Title: b.Title, Primary: b.Primary}}
	case "manifest":
		j := ingest.NewJob{Kind: "manifest", PayloadURL: b.PayloadURL, Title: b.Title, Primary: b.Primary}
		err := g.scanManifest(ctx, b.PayloadURL, true, func(r manifest.Row) error {
			j.Files = append(j.Files, ingest.File{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size})
			if r.LocalID != "" {
				j.LocalID = r.LocalID
			}
			return count(1)
		})
		if err != nil {
			return fail(err, "the manifest")
		}
		jobs = []ingest.NewJob{j}
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
			copied, err := ingest.CreateJobs(ctx, tx, &b.BatchRow, g.manifestJobs(ctx, b, b.Type == "manifest-of-containers"))
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
			j := ingest.NewJob{Kind: "manifest", PayloadURL: r.URL, LocalID: r.LocalID, Title: firstOf(r.Title, b.Title), Primary: r.Primary}
			err := g.scanManifest(ctx, r.URL, true, func(f manifest.Row) error {
				j.Files = append(j.Files, ingest.File{URL: f.URL, Name: f.Name, DigestAlg: f.DigestAlg, Digest: f.Digest, Size: f.Size})
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
		_, err := ingest.CreateJobs(ctx, tx, &b.BatchRow, func(yield func(ingest.NewJob, error) bool) {
			for _, j := range jobs {
				if !yield(j, nil) {
					return
				}
			}
		})
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
			jobs, err := ingest.JobsOf(ctx, tx, id)
			if err != nil {
				return err
			}
			return notify.Enqueue(ctx, tx, id, "confirmation", notify.Confirmation(st.Emails, b.mailed(), jobs))
		}
		return out, nil
	}
}

// manifestJobs are the jobs of batch b's manifest, a row each (a one-file
// object, or a container when containers), read from the manifest as they
// are asked for: one row in hand at a time.
func (g *Ingester) manifestJobs(ctx context.Context, b *batchRow, containers bool) iter.Seq2[ingest.NewJob, error] {
	return func(yield func(ingest.NewJob, error) bool) {
		err := g.scanManifest(ctx, b.PayloadURL, false, func(r manifest.Row) error {
			j := ingest.NewJob{Kind: "file", PayloadURL: r.URL, LocalID: r.LocalID, Title: firstOf(r.Title, b.Title), Primary: r.Primary,
				Files: []ingest.File{{URL: r.URL, Name: r.Name, DigestAlg: r.DigestAlg, Digest: r.Digest, Size: r.Size}}}
			if containers {
				// The container's declared size and digest are checked on
				// download (its files are the container's until it is
				// unpacked).
				j.Kind, j.Files[0].Name = "container", containerName
			}
			if !yield(j, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(ingest.NewJob{}, err)
		}
	}
}

// errStopped ends a manifest's reading that its reader stopped.
var errStopped = errors.New("stopped")

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
