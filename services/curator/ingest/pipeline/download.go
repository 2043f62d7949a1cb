package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
)

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
	if j.Kind == "container" && (len(files) == 0 || files[0].Size <= 0) {
		// Its size, unless a manifest of containers declared it.
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
	set := ingest.Columns{SpaceNeeded: &total, Priority: &prio}
	if j.Kind != "container" && len(probes) > 0 {
		set.Files = &files
	}
	return daemon.Outcome{To: ingest.Provisioning, Detail: detail, Set: set}, nil
}

// provision waits until the working area has room for the job.
func (g *Ingester) provision(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	ok, err := g.area.Admit(ctx, j.ID, j.SpaceNeeded)
	if err != nil || !ok {
		return daemon.Outcome{}, cmp.Or(err, daemon.ErrStay)
	}
	return daemon.Outcome{To: ingest.Downloading}, nil
}

// download GETs every file into the job's directory (several at once),
// retrying, and checks declared digests and sizes. A mismatch fails the
// job at once.
func (g *Ingester) download(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	dir := filepath.Join(g.area.JobDir(id), "payload")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return daemon.Outcome{}, err
	}
	files := j.Files
	if j.Kind == "container" {
		c := ingest.File{URL: j.PayloadURL, Name: containerName, Reported: j.SpaceNeeded}
		if len(j.Files) == 1 && j.Files[0].Name == containerName {
			// A manifest of containers declared its size and digest.
			c.DigestAlg, c.Digest, c.Size = j.Files[0].DigestAlg, j.Files[0].Digest, j.Files[0].Size
		}
		files = []ingest.File{c}
		dir = g.area.JobDir(id)
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
	set := ingest.Columns{SpaceNeeded: &total}
	if j.Kind != "container" {
		set.Files = &files
	}
	return daemon.Outcome{To: ingest.Processing, Detail: fmt.Sprintf("%d files, %d bytes", len(files), total), Set: set}, nil
}
