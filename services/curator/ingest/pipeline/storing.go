package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/container"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/archivist/archivist/services/curator/ingest/notify"
	"github.com/jackc/pgx/v5"
)

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
		src := filepath.Join(g.area.JobDir(id), containerName)
		lim := container.Limits{MaxBytes: g.cfg.MaxFileBytes, MaxEntries: g.cfg.MaxZipEntries, MaxRatio: g.cfg.MaxZipRatio}
		zr, total, err := container.Open(src, lim)
		if err != nil {
			return daemon.Outcome{To: ingest.Failed, Detail: "corrupt container: " + err.Error()}, nil
		}
		defer zr.Close()
		if ok, err := g.area.ReserveContent(ctx, j.ID, j.SpaceNeeded, total); err != nil || !ok {
			return daemon.Outcome{}, cmp.Or(err, daemon.ErrStay)
		}
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		entries, err := container.Extract(zr, filepath.Join(g.area.JobDir(id), "payload"))
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
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
	}
	ark, err := g.minter.Mint(ctx, j, b.erc(j))
	if err != nil {
		return daemon.Outcome{}, err
	}
	out := daemon.Outcome{To: ingest.Storing, Detail: ark}
	if j.Kind == "container" {
		out.Set = ingest.Columns{Files: &files}
	}
	return out, nil
}

// storeFiles puts the object's files and system files into the blob store
// as the next version of the object.
func (g *Ingester) storeFiles(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	// The object is this job's to store a version of until it is recorded
	// (or the job fails): another job of it waits, as does a withdrawal.
	version, err := inventory.Hold(ctx, g.store.DB, g.blob, j)
	switch {
	case errors.Is(err, inventory.ErrWait):
		return daemon.Outcome{}, daemon.ErrStay
	case err != nil:
		return daemon.Outcome{}, err
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
	}
	// The submission's own files; those an earlier attempt carried are
	// chosen again.
	own := slices.DeleteFunc(slices.Clone(j.Files), func(f ingest.File) bool { return f.Key != "" })
	j.Files = own
	set := ingest.Columns{Version: &version, Files: &j.Files}
	if j.Mode != "update" && version > 1 {
		// Add: the previous version's files come along, but those the
		// submission replaces.
		carried, err := inventory.Carried(ctx, g.store.DB, j, version)
		if err != nil {
			return daemon.Outcome{}, err
		}
		j.Files = append(slices.Clip(j.Files), carried...)
		set.Files = &j.Files
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
		_, err := g.blob.Put(ctx, inventory.Key(j.ARK, version, it.path), r, props)
		return err
	}
	var items []item
	for _, f := range j.Files {
		if f.Key != "" {
			continue // stored by an earlier version
		}
		items = append(items, item{path: "producer/" + f.Name, local: filepath.Join(g.area.JobDir(id), "payload", filepath.FromSlash(f.Name)), sha256: f.SHA256})
	}
	for _, f := range inventory.SystemFiles(j, b.erc(j)) {
		sum := sha256.Sum256(f.Body)
		items = append(items, item{path: "system/" + f.Name, body: f.Body, sha256: hex.EncodeToString(sum[:])})
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
			if errors.Is(err, blob.ErrExists) {
				// The store holds other bytes under this version (given
				// before, and forgotten by a restored database): they stay,
				// and the next attempt takes a new number.
				if aerr := inventory.Abandon(ctx, g.store.DB, j); aerr != nil {
					return daemon.Outcome{}, aerr
				}
				return daemon.Outcome{}, fmt.Errorf("storing %s: v%d of %s is taken in the store; a new version is given: %w", items[i].path, version, j.ARK, err)
			}
			// The store refusing or out: tried again (an outage pauses).
			return daemon.Outcome{}, fmt.Errorf("storing %s: %w", items[i].path, err)
		}
	}
	return daemon.Outcome{To: ingest.Recording, Detail: fmt.Sprintf("version %d", version), Set: set}, nil
}

// record checks every stored file reads back at its size, publishes
// archive.object.recorded for every file (de-duplicated
// by object key and version, so a retry publishes nothing twice) and writes
// the inventory in the transition's transaction.
func (g *Ingester) record(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	var rows []inventory.File
	carried := 0
	for _, f := range j.Files {
		key := f.Key
		if key == "" {
			key = inventory.Key(j.ARK, j.Version, "producer/"+f.Name)
		} else {
			carried++
		}
		rows = append(rows, inventory.File{Path: "producer/" + f.Name, Key: key, SHA256: f.SHA256, Size: f.Size, Carried: f.Key != ""})
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
	}
	for _, f := range inventory.SystemFiles(j, b.erc(j)) {
		s := sha256.Sum256(f.Body)
		rows = append(rows, inventory.File{Path: "system/" + f.Name, Key: inventory.Key(j.ARK, j.Version, "system/"+f.Name), SHA256: hex.EncodeToString(s[:]), Size: int64(len(f.Body))})
	}
	// What recording writes down must be in the store, whole.
	for _, r := range rows {
		info, err := g.blob.Stat(ctx, r.Key)
		if err != nil {
			// The store out or slow to show a new object: tried again,
			// within the budget (an outage pauses and spends nothing).
			return daemon.Outcome{}, fmt.Errorf("stored file %s cannot be read back: %w", r.Path, err)
		}
		if info.Size != r.Size {
			return daemon.Outcome{To: ingest.Failed, Detail: fmt.Sprintf("stored file %s has %d bytes, %d were stored", r.Path, info.Size, r.Size)}, nil
		}
	}
	var out []bus.Outgoing
	for _, r := range rows {
		if r.Carried {
			continue
		}
		ev := &events.ObjectRecorded{Object: r.Key, SHA256: r.SHA256, Size: r.Size, Update: j.Version > 1,
			Properties: map[string]string{"ark": j.ARK, "version": fmt.Sprint(j.Version), "path": r.Path}}
		env, err := events.New("curator", ev)
		if err != nil {
			return daemon.Outcome{}, err
		}
		env.ID = fmt.Sprintf("recorded:%s", r.Key) // the key names the version: a retry is a duplicate
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	if err := daemon.Fence(ctx); err != nil {
		return daemon.Outcome{}, err
	}
	if err := g.bus.PublishBatch(ctx, out); err != nil {
		return daemon.Outcome{}, fmt.Errorf("publish %s recorded: %w", j.ARK, err)
	}
	detail := fmt.Sprintf("%s v%d, %d files", j.ARK, j.Version, len(rows))
	if carried > 0 {
		detail += fmt.Sprintf(" (%d carried from the previous version)", carried)
	}
	return daemon.Outcome{To: ingest.Notify, Detail: detail, Apply: func(ctx context.Context, tx pgx.Tx) error {
		return inventory.Record(ctx, tx, j, rows)
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
	st, err := g.settings.Get(ctx, b.Profile)
	if err != nil {
		return daemon.Outcome{}, err
	}
	// The collection's callback (an operator's) hears of every deposit,
	// and the batch's own (its depositor's) besides: a depositor cannot
	// keep the collection's from hearing of its batches.
	for _, cb := range notify.Callbacks(st.CallbackURL, b.CallbackURL) {
		body, _ := json.Marshal(map[string]any{"batch": b.ID, "job": j.ID, "ark": j.ARK, "version": j.Version, "local_id": j.LocalID, "state": "completed"})
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		if last := g.fetch.PostRetrying(ctx, cb, body); last != nil {
			// A callback that refuses (4xx) fails the job; one that is down
			// is tried again, backing off, within the budget.
			if fault.IsPermanent(last) {
				return daemon.Outcome{To: ingest.Failed, Detail: "callback: " + last.Error()}, nil
			}
			return daemon.Outcome{}, fmt.Errorf("callback: %w", last)
		}
	}
	if err := os.RemoveAll(g.area.JobDir(id)); err != nil {
		g.log.WarnContext(ctx, "ingest: clean working directory", "job", id, "err", err)
	}
	return daemon.Outcome{To: ingest.Completed}, nil
}
