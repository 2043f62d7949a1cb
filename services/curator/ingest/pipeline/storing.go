package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/container"
	"github.com/archivist/archivist/services/curator/ingest/daemon"
	"github.com/archivist/archivist/services/curator/ingest/identifier"
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
		src := filepath.Join(g.jobDir(id), containerName)
		lim := container.Limits{MaxBytes: g.cfg.MaxFileBytes, MaxEntries: g.cfg.MaxZipEntries, MaxRatio: g.cfg.MaxZipRatio}
		zr, total, err := container.Open(src, lim)
		if err != nil {
			return daemon.Outcome{To: ingest.Failed, Detail: "corrupt container: " + err.Error()}, nil
		}
		defer zr.Close()
		if err := g.reserveContent(ctx, j, total); err != nil {
			return daemon.Outcome{}, err
		}
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		entries, err := container.Extract(zr, filepath.Join(g.jobDir(id), "payload"))
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
	ark, err := g.minter.Mint(ctx, j, identifier.ERC{Who: b.Creator, What: firstOf(j.Title, b.Title), When: b.Date})
	if err != nil {
		return daemon.Outcome{}, err
	}
	out := daemon.Outcome{To: ingest.Storing, Detail: ark}
	if j.Kind == "container" {
		out.Set = map[string]any{"files": files}
	}
	return out, nil
}

// xmlEscape is s as XML character data.
func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// reserveContent reserves room in the working area for a container's
// content before it is extracted: the job's space_needed grows by total
// (provisioning counts it for every job in processing), or, if the room
// is not there beyond INGEST_MIN_FREE_BYTES and what other jobs reserved,
// the job stays in processing for a later pass.
func (g *Ingester) reserveContent(ctx context.Context, j *ingest.JobRow, total int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.cfg.WorkDir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", g.cfg.WorkDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	g.resv.mu.Lock()
	defer g.resv.mu.Unlock()
	var others int64
	if err := g.store.DB.QueryRow(ctx, `SELECT coalesce(sum(space_needed), 0) FROM curator.jobs
		WHERE state IN ('downloading', 'processing') AND id <> $1`, j.ID).Scan(&others); err != nil {
		return err
	}
	if free-others-total < g.cfg.MinFreeBytes {
		g.log.Info("ingest: waiting for room to extract a container", "job", j.ID, "free", free, "reserved", others, "needed", total)
		return daemon.ErrStay
	}
	if _, err := g.store.DB.Exec(ctx, `UPDATE curator.jobs SET space_needed = $2 WHERE id = $1`, j.ID, j.SpaceNeeded+total); err != nil {
		return fmt.Errorf("reserve room for job %d: %w", j.ID, err)
	}
	g.resv.sum += total
	return nil
}

// objectKey is where a file of an object version lives in the blob store.
func objectKey(ark string, version int, path string) string {
	return fmt.Sprintf("objects/%s/v%d/%s", strings.NewReplacer(":", "", "/", "_").Replace(ark), version, path)
}

// sysFile is a file ingest adds to the producer's.
type sysFile struct {
	name string
	body []byte
}

// systemFiles are the object's ERC, Dublin Core and checkm storage
// manifest, in that order, made from the processed job and its batch.
func systemFiles(j *ingest.JobRow, b *batchRow) []sysFile {
	title := firstOf(j.Title, b.Title)
	erc := fmt.Sprintf("erc:\nwho: %s\nwhat: %s\nwhen: %s\nwhere: %s\n", firstOf(b.Creator, "(:unav)"), firstOf(title, "(:unav)"), firstOf(b.Date, "(:unav)"), j.ARK)
	dc := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<dc xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n"+
		"  <dc:creator>%s</dc:creator>\n  <dc:title>%s</dc:title>\n  <dc:date>%s</dc:date>\n  <dc:identifier>%s</dc:identifier>\n</dc>\n",
		xmlEscape(b.Creator), xmlEscape(title), xmlEscape(b.Date), xmlEscape(j.ARK))
	out := []sysFile{{"mrt-erc.txt", []byte(erc)}, {"mrt-dc.xml", []byte(dc)}}
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%fields | nfo:fileName | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize\n")
	for _, f := range j.Files {
		fmt.Fprintf(&m, "producer/%s | sha256 | %s | %d\n", f.Name, f.SHA256, f.Size)
	}
	for _, f := range out {
		s := sha256.Sum256(f.body)
		fmt.Fprintf(&m, "system/%s | sha256 | %s | %d\n", f.name, hex.EncodeToString(s[:]), len(f.body))
	}
	m.WriteString("#%eof\n")
	return append(out, sysFile{"mrt-manifest.checkm", []byte(m.String())})
}

// allocateVersion gives the job the next version number of its object and
// keeps it on the job, in one transaction: two jobs of one ARK get two
// numbers, and a retry of the job keeps its number.
func (g *Ingester) allocateVersion(ctx context.Context, j *ingest.JobRow) (int, error) {
	var version int
	err := pgx.BeginFunc(ctx, g.store.DB, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT version FROM curator.jobs WHERE id = $1 FOR UPDATE`, j.ID).Scan(&version); err != nil {
			return err
		}
		if version != 0 {
			return nil
		}
		if err := tx.QueryRow(ctx, `INSERT INTO curator.ark_versions (ark, last)
			VALUES ($1, coalesce((SELECT versions FROM curator.inventory_objects WHERE ark = $1), 0) + 1)
			ON CONFLICT (ark) DO UPDATE SET last = ark_versions.last + 1 RETURNING last`, j.ARK).Scan(&version); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE curator.jobs SET version = $2 WHERE id = $1`, j.ID, version)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("version of %s for job %d: %w", j.ARK, j.ID, err)
	}
	return version, nil
}

// storeFiles puts the object's files and system files into the blob store
// as the next version of the object.
func (g *Ingester) storeFiles(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	version := j.Version
	if version == 0 {
		var err error
		if version, err = g.allocateVersion(ctx, j); err != nil {
			return daemon.Outcome{}, err
		}
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
	}
	set := map[string]any{"version": version}
	if j.Mode != "update" && version > 1 {
		// Add: the previous version's files come along, but those the
		// submission replaces.
		carried, err := g.carried(ctx, j, version)
		if err != nil {
			return daemon.Outcome{}, err
		}
		if len(carried) > 0 {
			j.Files = append(slices.Clip(j.Files), carried...)
			set["files"] = j.Files
		}
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
		_, err := g.blob.Put(ctx, objectKey(j.ARK, version, it.path), r, props)
		return err
	}
	var items []item
	for _, f := range j.Files {
		if f.Key != "" {
			continue // stored by an earlier version
		}
		items = append(items, item{path: "producer/" + f.Name, local: filepath.Join(g.jobDir(id), "payload", filepath.FromSlash(f.Name)), sha256: f.SHA256})
	}
	for _, f := range systemFiles(j, b) {
		sum := sha256.Sum256(f.body)
		items = append(items, item{path: "system/" + f.name, body: f.body, sha256: hex.EncodeToString(sum[:])})
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
			// The store refusing or out: tried again (an outage pauses).
			return daemon.Outcome{}, fmt.Errorf("storing %s: %w", items[i].path, err)
		}
	}
	return daemon.Outcome{To: ingest.Recording, Detail: fmt.Sprintf("version %d", version), Set: set}, nil
}

// carried are the files of the object's latest recorded version before
// version that the job does not replace (by name), each with the key it is
// stored under.
func (g *Ingester) carried(ctx context.Context, j *ingest.JobRow, version int) ([]ingest.File, error) {
	replaced := make(map[string]bool, len(j.Files))
	for _, f := range j.Files {
		replaced[f.Name] = true
	}
	rows, err := g.store.DB.Query(ctx, `SELECT substr(path, 10), key, size, sha256 FROM curator.inventory_files
		WHERE ark = $1 AND path LIKE 'producer/%' AND version = (SELECT max(version) FROM curator.inventory_versions WHERE ark = $1 AND version < $2)
		ORDER BY path`, j.ARK, version)
	if err != nil {
		return nil, fmt.Errorf("the files of %s before v%d: %w", j.ARK, version, err)
	}
	defer rows.Close()
	var out []ingest.File
	for rows.Next() {
		var f ingest.File
		if err := rows.Scan(&f.Name, &f.Key, &f.Size, &f.SHA256); err != nil {
			return nil, err
		}
		if !replaced[f.Name] {
			out = append(out, f)
		}
	}
	return out, rows.Err()
}

// record checks every stored file reads back at its size, publishes
// archive.object.recorded for every file (de-duplicated
// by object key and version, so a retry publishes nothing twice) and writes
// the inventory in the transition's transaction.
func (g *Ingester) record(ctx context.Context, j *ingest.JobRow) (daemon.Outcome, error) {
	id := j.ID
	type row struct {
		path, key, sha string
		size           int64
		// carried: stored, and announced, by an earlier version.
		carried bool
	}
	var rows []row
	carried := 0
	for _, f := range j.Files {
		key := f.Key
		if key == "" {
			key = objectKey(j.ARK, j.Version, "producer/"+f.Name)
		} else {
			carried++
		}
		rows = append(rows, row{"producer/" + f.Name, key, f.SHA256, f.Size, f.Key != ""})
	}
	b, err := g.batch(ctx, j.BatchID)
	if err != nil {
		return daemon.Outcome{}, err
	}
	for _, f := range systemFiles(j, b) {
		s := sha256.Sum256(f.body)
		rows = append(rows, row{"system/" + f.name, objectKey(j.ARK, j.Version, "system/"+f.name), hex.EncodeToString(s[:]), int64(len(f.body)), false})
	}
	// What recording writes down must be in the store, whole.
	for _, r := range rows {
		info, err := g.blob.Stat(ctx, r.key)
		if err != nil {
			// The store out or slow to show a new object: tried again,
			// within the budget (an outage pauses and spends nothing).
			return daemon.Outcome{}, fmt.Errorf("stored file %s cannot be read back: %w", r.path, err)
		}
		if info.Size != r.size {
			return daemon.Outcome{To: ingest.Failed, Detail: fmt.Sprintf("stored file %s has %d bytes, %d were stored", r.path, info.Size, r.size)}, nil
		}
	}
	var out []bus.Outgoing
	for _, r := range rows {
		if r.carried {
			continue
		}
		ev := &events.ObjectRecorded{Object: r.key, SHA256: r.sha, Size: r.size, Update: j.Version > 1,
			Properties: map[string]string{"ark": j.ARK, "version": fmt.Sprint(j.Version), "path": r.path}}
		env, err := events.New("curator", ev)
		if err != nil {
			return daemon.Outcome{}, err
		}
		env.ID = fmt.Sprintf("recorded:%s", r.key) // the key names the version: a retry is a duplicate
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	if err := daemon.Fence(ctx); err != nil {
		return daemon.Outcome{}, err
	}
	if err := g.bus.PublishBatch(ctx, out); err != nil {
		return daemon.Outcome{}, fmt.Errorf("publish %s recorded: %w", j.ARK, err)
	}
	manifest := objectKey(j.ARK, j.Version, "system/mrt-manifest.checkm")
	detail := fmt.Sprintf("%s v%d, %d files", j.ARK, j.Version, len(rows))
	if carried > 0 {
		detail += fmt.Sprintf(" (%d carried from the previous version)", carried)
	}
	return daemon.Outcome{To: ingest.Notify, Detail: detail, Apply: func(ctx context.Context, tx pgx.Tx) error {
		// The object, its version and its files in one round trip.
		var b pgx.Batch
		b.Queue(`INSERT INTO curator.inventory_objects (ark, profile, local_id, title, versions) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (ark) DO UPDATE SET versions = greatest(inventory_objects.versions, EXCLUDED.versions), updated_at = now()`,
			j.ARK, j.Profile, j.LocalID, j.Title, j.Version)
		b.Queue(`INSERT INTO curator.inventory_versions (ark, version, job_id, manifest_key) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, j.ARK, j.Version, id, manifest)
		for _, r := range rows {
			b.Queue(`INSERT INTO curator.inventory_files (ark, version, path, key, size, sha256) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT DO NOTHING`, j.ARK, j.Version, r.path, r.key, r.size, r.sha)
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return fmt.Errorf("inventory of %s v%d: %w", j.ARK, j.Version, err)
		}
		return nil
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
	if b.CB != "" {
		body, _ := json.Marshal(map[string]any{"batch": b.ID, "job": j.ID, "ark": j.ARK, "version": j.Version, "local_id": j.LocalID, "state": "completed"})
		if err := daemon.Fence(ctx); err != nil {
			return daemon.Outcome{}, err
		}
		if last := g.fetch.PostRetrying(ctx, b.CB, body); last != nil {
			// A callback that refuses (4xx) fails the job; one that is down
			// is tried again, backing off, within the budget.
			if fault.IsPermanent(last) {
				return daemon.Outcome{To: ingest.Failed, Detail: "callback: " + last.Error()}, nil
			}
			return daemon.Outcome{}, fmt.Errorf("callback: %w", last)
		}
	}
	if err := os.RemoveAll(g.jobDir(id)); err != nil {
		g.log.Warn("ingest: clean working directory", "job", id, "err", err)
	}
	return daemon.Outcome{To: ingest.Completed}, nil
}
