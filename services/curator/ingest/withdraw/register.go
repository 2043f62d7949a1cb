package withdraw

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
)

// RegisterPrefix is where the blob store keeps the register of takedowns:
// an entry a withdrawn version, outside the database.
const RegisterPrefix = "takedowns/"

// Takedown is an entry of the register of takedowns: a withdrawn version,
// whose object it was, and the keys of its files. A restore of the
// database to before the withdrawal loses the withdrawal there, not here;
// Replay applies it again.
type Takedown struct {
	ARK     string `json:"ark"`
	Version int    `json:"version"`
	// Object says the whole object was withdrawn, at ObjectAt.
	Object   bool      `json:"object"`
	ObjectAt time.Time `json:"object_at,omitzero"`
	// At is when the version was withdrawn.
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
	// Submitter, Profile and LocalID bind the ARK to its depositor again
	// in a database that forgot it; Title names the object.
	Submitter string `json:"submitter,omitempty"`
	Profile   string `json:"profile,omitempty"`
	LocalID   string `json:"local_id,omitempty"`
	Title     string `json:"title,omitempty"`
	// Files are the version's keys.
	Files []string `json:"files"`
}

// versionEntry is the name of a version's entry in the register.
var versionEntry = regexp.MustCompile(`^v[1-9][0-9]*\.json$`)

// registerKey is where the register keeps a's version's entry.
func registerKey(a string, version int) string {
	return RegisterPrefix + strings.TrimPrefix(inventory.Prefix(a), "objects/") + fmt.Sprintf("v%d.json", version)
}

// register writes t's entry (again: an entry says what the latest
// withdrawal of the object knew) and lists it, as written, as applied.
func (w *Withdrawer) register(ctx context.Context, t Takedown) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	key := registerKey(t.ARK, t.Version)
	if _, err := w.Blob.Put(ctx, key, bytes.NewReader(b), map[string]string{"content-type": "application/json"}); err != nil {
		return fmt.Errorf("register the takedown of %s v%d: %w", t.ARK, t.Version, err)
	}
	// The checksum as a listing gives it (Replay compares listings; a put
	// may answer another algorithm's, as S3 does).
	infos, err := blob.ListAfter(ctx, w.Blob, key, "", 1)
	if err != nil {
		return fmt.Errorf("register the takedown of %s v%d: %w", t.ARK, t.Version, err)
	}
	if len(infos) == 0 || infos[0].Key != key {
		return nil // gone meanwhile: the next pass sees what is there
	}
	return w.applied(ctx, key, infos[0].Checksum.Value)
}

// applied lists the register's entry at key, with the store's checksum of
// it, as applied by this database.
func (w *Withdrawer) applied(ctx context.Context, key, checksum string) error {
	if _, err := w.DB.Exec(ctx, `INSERT INTO curator.takedowns_applied (key, checksum) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET checksum = excluded.checksum, at = now()`, key, checksum); err != nil {
		return fmt.Errorf("takedown %s applied: %w", key, err)
	}
	return nil
}

// reinstatedName is the register's entry, beside an object's withdrawn
// versions', of its latest reinstatement: a takedown before it is not
// applied again to the whole object.
const reinstatedName = "reinstated.json"

// Reinstatement is the register's record of an object's latest
// reinstatement.
type Reinstatement struct {
	ARK    string    `json:"ark"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
}

// registerReinstatement writes the object's reinstatement to the register.
func (w *Withdrawer) registerReinstatement(ctx context.Context, r Reinstatement) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	key := RegisterPrefix + strings.TrimPrefix(inventory.Prefix(r.ARK), "objects/") + reinstatedName
	if _, err := w.Blob.Put(ctx, key, bytes.NewReader(b), map[string]string{"content-type": "application/json"}); err != nil {
		return fmt.Errorf("register the reinstatement of %s: %w", r.ARK, err)
	}
	return nil
}

// reinstatedSince reports whether the register holds a reinstatement of a
// after at.
func (w *Withdrawer) reinstatedSince(ctx context.Context, a string, at time.Time) (bool, error) {
	rc, _, err := w.Blob.Get(ctx, RegisterPrefix+strings.TrimPrefix(inventory.Prefix(a), "objects/")+reinstatedName)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	var r Reinstatement
	if err := json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&r); err != nil {
		return false, nil // unreadable: the takedown stands
	}
	return r.At.After(at), nil
}

// Replayed is what one page of the register's replay did.
type Replayed struct {
	// Read is how many entries the page held.
	Read int
	// Applied are takedowns the database did not list as applied, applied
	// again.
	Applied int
	// PassDone says the page ended a pass over the register.
	PassDone bool
}

// Replay reads the next page of up to page entries of the register of
// takedowns and applies again each the database does not list as applied
// (curator.takedowns_applied: a restored database lists none made after
// its backup, and a replay cut short none it did not finish): a version
// the database holds but has not withdrawn is withdrawn again (the whole
// object if the takedown was of the object and no reinstatement followed
// it); one it has withdrawn has its deletions announced again; a version
// it never knew has its files' deletion announced and done again, and,
// for an object's takedown, the object kept as a tombstone bound to its
// depositor, so that a deposit into it fails until an operator reinstates
// it. A page costs a listing and a query, and a read of each entry not
// listed: it grows with the takedowns, not the archive.
func (w *Withdrawer) Replay(ctx context.Context, page int) (Replayed, error) {
	var r Replayed
	var after string
	var passes int64
	var full bool
	if err := w.DB.QueryRow(ctx, `SELECT after, passes, full_pass FROM curator.takedown_replay`).Scan(&after, &passes, &full); err != nil {
		return r, fmt.Errorf("takedown register cursor: %w", err)
	}
	if after == "" && !full {
		// A new pass: a database that has ended fewer passes than the
		// store says was restored, and other services' state with it.
		stored, err := w.storedPasses(ctx)
		if err != nil {
			return r, err
		}
		if stored > passes {
			full = true
			w.Log.WarnContext(ctx, "ingest: the database has ended fewer passes over the takedown register than the store records: it was restored; every takedown is applied again",
				"passes", passes, "stored", stored)
			if _, err := w.DB.Exec(ctx, `UPDATE curator.takedown_replay SET full_pass = true, passes = $1`, stored); err != nil {
				return r, fmt.Errorf("takedown register cursor: %w", err)
			}
			passes = stored
		}
	}
	infos, err := blob.ListAfter(ctx, w.Blob, RegisterPrefix, after, page)
	if err != nil {
		return r, fmt.Errorf("list the takedown register after %q: %w", after, err)
	}
	r.Read, r.PassDone = len(infos), len(infos) < page
	var keys, sums []string
	for _, info := range infos {
		if versionEntry.MatchString(info.Key[strings.LastIndexByte(info.Key, '/')+1:]) {
			keys, sums = append(keys, info.Key), append(sums, info.Checksum.Value)
		}
	}
	// An entry is applied when the database lists its key with the
	// checksum the store has now: one written again since (a takedown
	// after a reinstatement) is applied again.
	rows, err := w.DB.Query(ctx, `SELECT e.k, e.c FROM unnest($1::text[], $2::text[]) AS e(k, c)
		WHERE $3 OR NOT EXISTS (SELECT 1 FROM curator.takedowns_applied a WHERE a.key = e.k AND a.checksum = e.c)`, keys, sums, full)
	if err != nil {
		return r, fmt.Errorf("takedowns applied: %w", err)
	}
	type entry struct{ Key, Sum string }
	unknown, err := pgx.CollectRows(rows, pgx.RowToStructByPos[entry])
	if err != nil {
		return r, fmt.Errorf("takedowns applied: %w", err)
	}
	for _, e := range unknown {
		key := e.Key
		applied, err := w.replayOne(ctx, key)
		if err != nil && (ctx.Err() != nil || fault.IsOutage(err)) {
			return r, err // a dependency away: this page again, later
		}
		if err != nil {
			// One entry that cannot be applied now holds up none after
			// it: not listed as applied, the next pass tries it again.
			w.Log.ErrorContext(ctx, "ingest: a takedown of the register could not be applied again; the next pass tries again", "key", key, "err", err)
			continue
		}
		if err := w.applied(ctx, key, e.Sum); err != nil {
			return r, err
		}
		if applied {
			r.Applied++
		}
	}
	if len(infos) > 0 {
		after = infos[len(infos)-1].Key
	}
	if r.PassDone {
		after, full = "", false
		passes++
		if err := w.storePasses(ctx, passes); err != nil {
			return r, err
		}
	}
	if _, err := w.DB.Exec(ctx, `UPDATE curator.takedown_replay SET after = $1, passes = $2, full_pass = $3`, after, passes, full); err != nil {
		return r, fmt.Errorf("takedown register cursor: %w", err)
	}
	return r, nil
}

// epochKey is where the store keeps the number of passes ended.
const epochKey = RegisterPrefix + "epoch.json"

// storedPasses is the number of passes the store says ended (0 if none).
func (w *Withdrawer) storedPasses(ctx context.Context) (int64, error) {
	rc, _, err := w.Blob.Get(ctx, epochKey)
	if errors.Is(err, blob.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("takedown register epoch: %w", err)
	}
	defer rc.Close()
	var e struct{ Passes int64 }
	if err := json.NewDecoder(io.LimitReader(rc, 1<<10)).Decode(&e); err != nil {
		return 0, nil // unreadable: written again at the pass's end
	}
	return e.Passes, nil
}

// storePasses records in the store that passes passes ended.
func (w *Withdrawer) storePasses(ctx context.Context, passes int64) error {
	if _, err := w.Blob.Put(ctx, epochKey, strings.NewReader(fmt.Sprintf(`{"passes": %d}`, passes)), nil); err != nil {
		return fmt.Errorf("takedown register epoch: %w", err)
	}
	return nil
}

// replayOne applies again the register's entry at key, which the database
// does not list as applied, and reports whether there was anything to do.
func (w *Withdrawer) replayOne(ctx context.Context, key string) (bool, error) {
	rc, _, err := w.Blob.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("takedown %s: %w", key, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	rc.Close()
	if err != nil {
		return false, fmt.Errorf("takedown %s: %w", key, err)
	}
	var t Takedown
	if err := json.Unmarshal(b, &t); err != nil || ark.Check(t.ARK) != nil || t.Version <= 0 {
		w.Log.ErrorContext(ctx, "ingest: an entry of the takedown register cannot be read; it is left alone", "key", key, "err", err)
		return false, nil
	}
	// What the database knows of the version and the object; a
	// reinstatement after the object's takedown (in the database or the
	// register) is the operator's word.
	objectAt := cmp.Or(t.ObjectAt, t.At)
	var withdrawn, objectLive *bool
	var reinstated bool
	if err := w.DB.QueryRow(ctx, `SELECT (SELECT withdrawn_at IS NOT NULL FROM curator.inventory_versions WHERE ark = $1 AND version = $2),
		(SELECT withdrawn_at IS NULL FROM curator.inventory_objects WHERE ark = $1),
		EXISTS (SELECT 1 FROM curator.withdrawals WHERE ark = $1 AND action = 'reinstate' AND at > $3)`, t.ARK, t.Version, objectAt).
		Scan(&withdrawn, &objectLive, &reinstated); err != nil {
		return false, fmt.Errorf("takedown %s: %w", key, err)
	}
	if t.Object && !reinstated {
		if reinstated, err = w.reinstatedSince(ctx, t.ARK, objectAt); err != nil {
			return false, fmt.Errorf("takedown %s: %w", key, err)
		}
	}
	whole := t.Object && !reinstated
	by := cmp.Or(t.By, "the takedown register")
	if withdrawn != nil {
		// Withdrawn again, or (withdrawn already) finished again: its
		// deletions announced anew.
		version := t.Version
		if whole && objectLive != nil && *objectLive {
			version = 0
		}
		if _, err := w.Withdraw(ctx, Request{ARK: t.ARK, Version: version, Reason: t.Reason, By: by, replay: true}); err != nil {
			return false, fmt.Errorf("takedown %s: %w", key, err)
		}
		w.Log.WarnContext(ctx, "ingest: a takedown the database did not list applied again", "ark", t.ARK, "version", t.Version,
			"was_withdrawn", *withdrawn, "object", version == 0)
		return true, nil
	}
	// A version the database never knew: its files go (again), but any a
	// version it holds, not withdrawn, still holds.
	rows, err := w.DB.Query(ctx, `SELECT k FROM unnest($1::text[]) k WHERE NOT EXISTS (
		SELECT 1 FROM curator.inventory_files f JOIN curator.inventory_versions v USING (ark, version) WHERE f.key = k AND v.withdrawn_at IS NULL)`, t.Files)
	if err != nil {
		return false, fmt.Errorf("takedown %s: %w", key, err)
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("takedown %s: %w", key, err)
	}
	out, err := deletions(gone, true)
	if err != nil {
		return false, err
	}
	if err := w.Bus.PublishBatch(ctx, out); err != nil {
		return false, fmt.Errorf("takedown %s: announce: %w", key, err)
	}
	for _, k := range gone {
		if err := w.Blob.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return false, fmt.Errorf("takedown %s: delete %s: %w", key, k, err)
		}
	}
	if whole {
		if err := w.keepTombstone(ctx, t, t.Reason); err != nil {
			return false, fmt.Errorf("takedown %s: %w", key, err)
		}
	}
	w.Log.WarnContext(ctx, "ingest: a takedown of a version the database never knew applied again", "ark", t.ARK, "version", t.Version,
		"files_deleted", len(gone), "object", whole)
	return true, nil
}

// keepTombstone makes the object of t, which the database does not hold as
// withdrawn, a tombstone: its ARK bound to its depositor again, and the
// object withdrawn (a live one, deposited again since the restore, with
// every version).
func (w *Withdrawer) keepTombstone(ctx context.Context, t Takedown, why string) error {
	norm, err := ark.Normalize(t.ARK)
	if err != nil {
		return err
	}
	prefix, _ := ark.StoragePrefix(t.ARK)
	if _, err := w.DB.Exec(ctx, `INSERT INTO curator.arks (ark, norm, storage_prefix, submitter, profile, local_id, job_id, minter)
		VALUES ($1, $2, $3, $4, $5, $6, 0, 'register') ON CONFLICT DO NOTHING`, t.ARK, norm, prefix, t.Submitter, t.Profile, t.LocalID); err != nil {
		return fmt.Errorf("bind %s: %w", t.ARK, err)
	}
	var live bool
	err = w.DB.QueryRow(ctx, `SELECT withdrawn_at IS NULL FROM curator.inventory_objects WHERE ark = $1`, t.ARK).Scan(&live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		_, err = w.DB.Exec(ctx, `INSERT INTO curator.inventory_objects (ark, profile, local_id, title, versions, withdrawn_at, withdrawn_reason)
			VALUES ($1, $2, $3, $4, 0, $5, $6) ON CONFLICT (ark) DO NOTHING`, t.ARK, t.Profile, t.LocalID, t.Title, cmp.Or(t.ObjectAt, t.At), why)
		return err
	case err != nil:
		return err
	case live:
		_, err := w.Withdraw(ctx, Request{ARK: t.ARK, Reason: why, By: cmp.Or(t.By, "the takedown register"), replay: true})
		return err
	}
	return nil
}
