// Package withdraw takes an object, or one version of it, out of the
// archive at an operator's request: the withdrawal is recorded with its
// reason, the inventory keeps the object as a tombstone (when, why), and
// every file no version still held keeps is announced deleted
// (archive.object.deleted: the auditor's content index lets it go, so
// its next check is the outcome table's row 11; the aggregator takes a
// WARC's lines out of the index) and deleted from the store.
package withdraw

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
)

// Request is a withdrawal.
type Request struct {
	ARK string `json:"ark"`
	// Version is the version withdrawn (0: every version, the object).
	Version int    `json:"version,omitempty"`
	Reason  string `json:"reason"`
	// By is who asked (the caller).
	By string `json:"-"`
	// replay: the register's, applied again after a restore; its
	// announcements are sent anew (not de-duplicated against the first's).
	replay bool
}

// Result is what a withdrawal did.
type Result struct {
	ARK string `json:"ark"`
	// Versions are the versions now withdrawn (earlier ones included).
	Versions []int `json:"versions"`
	// Deleted are the keys of the withdrawn versions' files that no other
	// version holds: deleted now (or by an earlier withdrawal).
	Deleted []string `json:"deleted"`
	// Object says the whole object is withdrawn.
	Object bool `json:"object"`
	// object is what the register of takedowns keeps of it.
	object Takedown
}

// Withdrawer withdraws and reinstates.
type Withdrawer struct {
	DB   *pgxpool.Pool
	Blob blob.Store
	Bus  *bus.Bus
	Log  *slog.Logger
	// Wait bounds how long a withdrawal waits for the job storing a
	// version of the object (0: 2 minutes); beyond it the withdrawal is
	// refused (HeldError), to be asked again.
	Wait time.Duration
}

// HeldError is a withdrawal that waited its while for the job storing a
// version of the object: nothing is withdrawn; ask again.
type HeldError struct {
	ARK string
	Job int64
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("job %d is storing a version of %s: the withdrawal waits for it to be recorded or to fail, and waited its while; ask again", e.Job, e.ARK)
}

// withdrawalHold is how long a withdrawal waiting for a job keeps other
// jobs from beginning a version of the object, past its own wait (a
// withdrawer that died lets them go on after it).
const withdrawalHold = 30 * time.Second

// Canonical is the ARK as the archive holds it for any spelling of it
// (package ark), or "" when it names no object the archive gave.
func Canonical(ctx context.Context, db *pgxpool.Pool, a string) (string, error) {
	norm, err := ark.Normalize(a)
	if err != nil {
		return "", &ingest.InvalidError{Field: "ark", Msg: err.Error()}
	}
	var held string
	if err := db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE norm = $1`, norm).Scan(&held); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("ark %s: %w", a, err)
	}
	return held, nil
}

// Withdraw withdraws what r names, the ARK in any spelling. It is
// serialized with ingest: while a job stores a version of the object the
// withdrawal waits (no other job begins one meanwhile), then withdraws;
// the object withdrawn takes no deposit until an operator reinstates it.
// Each withdrawn version leaves a tombstone in the store
// (system/mrt-withdrawn.txt under the version), so that its number is
// never given again, even by a database restored to before it. It is
// idempotent: asked again (after a crash halfway, say), it announces and
// deletes whatever of the withdrawn versions' files is left.
func (w *Withdrawer) Withdraw(ctx context.Context, r Request) (*Result, error) {
	if err := ark.Check(r.ARK); err != nil {
		return nil, &ingest.InvalidError{Field: "ark", Msg: err.Error()}
	}
	if r.Version < 0 {
		return nil, &ingest.InvalidError{Field: "version", Msg: "a version number, or 0 for every version"}
	}
	if strings.TrimSpace(r.Reason) == "" || len(r.Reason) > 2000 {
		return nil, &ingest.InvalidError{Field: "reason", Msg: "required, at most 2000 bytes: the tombstone says why"}
	}
	held, err := Canonical(ctx, w.DB, r.ARK)
	if err != nil {
		return nil, err
	}
	if held != "" {
		r.ARK = held
	}
	wait := cmp.Or(w.Wait, 2*time.Minute)
	deadline := time.Now().Add(wait)
	for {
		res, tombstones, err := w.withdraw(ctx, r, time.Until(deadline)+withdrawalHold)
		var he *HeldError
		if errors.As(err, &he) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("withdraw %s: %w", r.ARK, err)
		}
		if err := w.finish(ctx, r, res, tombstones); err != nil {
			return nil, fmt.Errorf("withdraw %s: %w", r.ARK, err)
		}
		return res, nil
	}
}

// tombstone is a withdrawn version's record in the store.
type tombstone struct {
	version int
	at      time.Time
	reason  string
	// files are the version's keys.
	files []string
}

// withdraw records the withdrawal in one transaction, unless a job holds
// the object (HeldError, with the object kept from new jobs for hold).
func (w *Withdrawer) withdraw(ctx context.Context, r Request, hold time.Duration) (*Result, []tombstone, error) {
	res := &Result{ARK: r.ARK}
	var stones []tombstone
	var heldBy int64
	err := pgx.BeginFunc(ctx, w.DB, func(tx pgx.Tx) error {
		var versions int
		err := tx.QueryRow(ctx, `SELECT versions FROM curator.inventory_objects WHERE ark = $1 FOR UPDATE`, r.ARK).Scan(&versions)
		if errors.Is(err, pgx.ErrNoRows) {
			return &ingest.InvalidError{Field: "ark", Msg: r.ARK + " is no object of the inventory"}
		}
		if err != nil {
			return err
		}
		if r.Version > versions {
			return &ingest.InvalidError{Field: "version", Msg: fmt.Sprintf("%s has %d versions", r.ARK, versions)}
		}
		// The object's lock (inventory.Hold's): a job storing a version
		// of it is waited for.
		if _, err := tx.Exec(ctx, `INSERT INTO curator.ark_versions (ark, last) VALUES ($1, $2) ON CONFLICT (ark) DO NOTHING`, r.ARK, versions); err != nil {
			return err
		}
		var last int
		if err := tx.QueryRow(ctx, `SELECT last FROM curator.ark_versions WHERE ark = $1 FOR UPDATE`, r.ARK).Scan(&last); err != nil {
			return err
		}
		job, err := ingest.VersionHolder(ctx, tx, r.ARK, last, 0)
		if err != nil {
			return err
		}
		if job != 0 {
			// Committed, so that no other job begins a version meanwhile.
			_, err := tx.Exec(ctx, `UPDATE curator.ark_versions SET withdrawal_until = now() + $2::interval WHERE ark = $1`, r.ARK, hold)
			heldBy = job
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE curator.ark_versions SET withdrawal_until = NULL WHERE ark = $1`, r.ARK); err != nil {
			return err
		}
		versionsTag, err := tx.Exec(ctx, `UPDATE curator.inventory_versions SET withdrawn_at = now(), withdrawn_reason = $3
			WHERE ark = $1 AND ($2 = 0 OR version = $2) AND withdrawn_at IS NULL`, r.ARK, r.Version, r.Reason)
		if err != nil {
			return err
		}
		// The object is withdrawn with its last live version, or when it is
		// named; a withdrawal of versions withdrawn already (after the
		// object's reinstatement) does not withdraw it again.
		objectTag, err := tx.Exec(ctx, `UPDATE curator.inventory_objects SET withdrawn_at = now(), withdrawn_reason = $2
			WHERE ark = $1 AND withdrawn_at IS NULL AND ($3 OR $4 = 0)
			AND NOT EXISTS (SELECT 1 FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NULL)`,
			r.ARK, r.Reason, versionsTag.RowsAffected() > 0, r.Version)
		if err != nil {
			return err
		}
		// A replay that finds it all done (it finishes the announcements
		// again) is no new withdrawal for the log.
		if !r.replay || versionsTag.RowsAffected()+objectTag.RowsAffected() > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO curator.withdrawals (ark, version, reason, by_whom) VALUES ($1, $2, $3, $4)`, r.ARK, r.Version, r.Reason, r.By); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT version, withdrawn_at, withdrawn_reason FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NOT NULL ORDER BY version`, r.ARK)
		if err != nil {
			return err
		}
		for rows.Next() {
			var t tombstone
			if err := rows.Scan(&t.version, &t.at, &t.reason); err != nil {
				rows.Close()
				return err
			}
			stones = append(stones, t)
			res.Versions = append(res.Versions, t.version)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var objectAt *time.Time
		if err := tx.QueryRow(ctx, `SELECT o.withdrawn_at, o.profile, o.local_id, o.title, coalesce(a.submitter, '')
			FROM curator.inventory_objects o LEFT JOIN curator.arks a ON a.ark = o.ark WHERE o.ark = $1`, r.ARK).
			Scan(&objectAt, &res.object.Profile, &res.object.LocalID, &res.object.Title, &res.object.Submitter); err != nil {
			return err
		}
		res.Object = objectAt != nil
		if objectAt != nil {
			res.object.ObjectAt = *objectAt
		}
		rows, err = tx.Query(ctx, `SELECT version, key FROM curator.inventory_files WHERE ark = $1 AND version = ANY($2) ORDER BY key`, r.ARK, res.Versions)
		if err != nil {
			return err
		}
		byVersion := map[int][]string{}
		for rows.Next() {
			var v int
			var key string
			if err := rows.Scan(&v, &key); err != nil {
				rows.Close()
				return err
			}
			byVersion[v] = append(byVersion[v], key)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range stones {
			stones[i].files = byVersion[stones[i].version]
			// This database made (or knew) each: a replay lists them once
			// it has finished them.
			if !r.replay {
				if _, err := tx.Exec(ctx, `INSERT INTO curator.takedowns_applied (key) VALUES ($1) ON CONFLICT DO NOTHING`,
					registerKey(r.ARK, stones[i].version)); err != nil {
					return err
				}
			}
		}
		// The withdrawn versions' files that no version still held keeps
		// (a file carried from version to version is stored once).
		rows, err = tx.Query(ctx, `SELECT DISTINCT f.key FROM curator.inventory_files f JOIN curator.inventory_versions v USING (ark, version)
			WHERE f.ark = $1 AND v.withdrawn_at IS NOT NULL AND NOT EXISTS (
				SELECT 1 FROM curator.inventory_files f2 JOIN curator.inventory_versions v2 USING (ark, version)
				WHERE f2.key = f.key AND v2.withdrawn_at IS NULL) ORDER BY f.key`, r.ARK)
		if err != nil {
			return err
		}
		res.Deleted, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err == nil && heldBy != 0 {
		return nil, nil, &HeldError{ARK: r.ARK, Job: heldBy}
	}
	return res, stones, err
}

// finish leaves each withdrawn version's tombstone in the store, then
// announces its files deleted and deletes them: a crash in between is
// finished by asking again (tombstones are the same bytes again; the
// announcements are de-duplicated by key).
func (w *Withdrawer) finish(ctx context.Context, r Request, res *Result, stones []tombstone) error {
	var out []bus.Outgoing
	for _, t := range stones {
		key := inventory.Key(r.ARK, t.version, TombstoneName)
		body := fmt.Sprintf("erc:\nwho: (:unav)\nwhat: withdrawn\nwhen: %s\nwhere: %s/v%d\nwhy: %s\n",
			t.at.UTC().Format(time.RFC3339), r.ARK, t.version, strings.ReplaceAll(t.reason, "\n", " "))
		sum := sha256.Sum256([]byte(body))
		hexsum := hex.EncodeToString(sum[:])
		if _, err := w.Blob.Put(ctx, key, strings.NewReader(body), map[string]string{blob.PropSHA256: hexsum}); err != nil && !errors.Is(err, blob.ErrExists) {
			return fmt.Errorf("tombstone of v%d: %w", t.version, err)
		}
		env, err := events.New("curator", &events.ObjectRecorded{Object: key, SHA256: hexsum, Size: int64(len(body)),
			Properties: map[string]string{"ark": r.ARK, "version": fmt.Sprint(t.version), "path": TombstoneName}})
		if err != nil {
			return err
		}
		env.ID = "recorded:" + key
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectRecorded, Envelope: env})
	}
	// The register, outside the database: a restore of the database
	// cannot undo the takedown (Replay).
	for _, t := range stones {
		entry := res.object
		entry.ARK, entry.Version, entry.Object, entry.At, entry.Reason, entry.By, entry.Files = r.ARK, t.version, res.Object, t.at, t.reason, r.By, t.files
		if err := w.register(ctx, entry); err != nil {
			return err
		}
	}
	deleted, err := deletions(res.Deleted, r.replay)
	if err != nil {
		return err
	}
	if err := w.Bus.PublishBatch(ctx, append(out, deleted...)); err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	for _, key := range res.Deleted {
		if err := w.Blob.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	w.Log.WarnContext(ctx, "ingest: withdrawn", "ark", r.ARK, "version", r.Version, "by", r.By, "reason", r.Reason, "files_deleted", len(res.Deleted), "object", res.Object)
	return nil
}

// deletions are the announcements that keys are deleted, de-duplicated by
// key (message id deleted:KEY), or, for a replay after a restore, sent
// anew: the first announcement's id may still be in the stream's window.
func deletions(keys []string, replay bool) ([]bus.Outgoing, error) {
	var out []bus.Outgoing
	for _, key := range keys {
		env, err := events.New("curator", &events.ObjectDeleted{Object: key})
		if err != nil {
			return nil, err
		}
		env.ID = "deleted:" + key
		if replay {
			env.ID += ":replayed:" + env.SentAt.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectDeleted, Envelope: env})
	}
	return out, nil
}

// TombstoneName is the path, in a withdrawn version, of the tombstone
// the store keeps: when, where and why (ERC).
const TombstoneName = "system/mrt-withdrawn.txt"

// Reinstate lets a withdrawn object take deposits again, at an operator's
// request (reason required, recorded beside the withdrawals): its next
// deposit makes a new version; the versions withdrawn stay withdrawn,
// their files gone.
func (w *Withdrawer) Reinstate(ctx context.Context, r Request) (*Object, error) {
	if err := ark.Check(r.ARK); err != nil {
		return nil, &ingest.InvalidError{Field: "ark", Msg: err.Error()}
	}
	if strings.TrimSpace(r.Reason) == "" || len(r.Reason) > 2000 {
		return nil, &ingest.InvalidError{Field: "reason", Msg: "required, at most 2000 bytes: the record says why"}
	}
	if held, err := Canonical(ctx, w.DB, r.ARK); err != nil {
		return nil, err
	} else if held != "" {
		r.ARK = held
	}
	var at time.Time
	var last *Reinstatement // the reinstatement that made it live, when it is
	err := pgx.BeginFunc(ctx, w.DB, func(tx pgx.Tx) error {
		var withdrawn bool
		err := tx.QueryRow(ctx, `SELECT withdrawn_at IS NOT NULL FROM curator.inventory_objects WHERE ark = $1 FOR UPDATE`, r.ARK).Scan(&withdrawn)
		if errors.Is(err, pgx.ErrNoRows) {
			return &ingest.InvalidError{Field: "ark", Msg: r.ARK + " is no object of the inventory"}
		}
		if err != nil {
			return err
		}
		if !withdrawn {
			// Live by a reinstatement (the ARK's latest record), whose
			// register entry the answer may have lost.
			var re Reinstatement
			var action string
			if err := tx.QueryRow(ctx, `SELECT at, reason, by_whom, action FROM curator.withdrawals WHERE ark = $1 ORDER BY id DESC LIMIT 1`,
				r.ARK).Scan(&re.At, &re.Reason, &re.By, &action); err == nil && action == "reinstate" {
				re.ARK = r.ARK
				last = &re
			}
			return &ingest.ConflictError{Msg: r.ARK + " is not withdrawn"}
		}
		if _, err := tx.Exec(ctx, `UPDATE curator.inventory_objects SET withdrawn_at = NULL, withdrawn_reason = '' WHERE ark = $1`, r.ARK); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO curator.withdrawals (ark, version, reason, by_whom, action) VALUES ($1, 0, $2, $3, 'reinstate') RETURNING at`,
			r.ARK, r.Reason, r.By).Scan(&at)
	})
	if last != nil {
		// Live by a reinstatement whose answer was lost (a kill between
		// its commit and its register entry, say): the caller asks again,
		// and the register gets it now, so that a restore of the database
		// does not undo it either.
		if rerr := w.registerReinstatement(ctx, *last); rerr != nil {
			return nil, fmt.Errorf("reinstate %s: %w", r.ARK, rerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reinstate %s: %w", r.ARK, err)
	}
	// The register too: a restore of the database does not undo it.
	if err := w.registerReinstatement(ctx, Reinstatement{ARK: r.ARK, At: at, Reason: r.Reason, By: r.By}); err != nil {
		return nil, fmt.Errorf("reinstate %s: %w", r.ARK, err)
	}
	w.Log.WarnContext(ctx, "ingest: reinstated", "ark", r.ARK, "by", r.By, "reason", r.Reason)
	return Show(ctx, w.DB, r.ARK, "")
}

// Version is an object version as the inventory keeps it: a tombstone
// once withdrawn.
type Version struct {
	Version         int        `json:"version"`
	JobID           int64      `json:"job"`
	CreatedAt       time.Time  `json:"created_at"`
	Files           int        `json:"files"`
	WithdrawnAt     *time.Time `json:"withdrawn_at,omitempty"`
	WithdrawnReason string     `json:"withdrawn_reason,omitempty"`
}

// Object is an object as the inventory keeps it.
type Object struct {
	ARK             string     `json:"ark"`
	Profile         string     `json:"profile"`
	LocalID         string     `json:"local_id,omitempty"`
	Title           string     `json:"title,omitempty"`
	WithdrawnAt     *time.Time `json:"withdrawn_at,omitempty"`
	WithdrawnReason string     `json:"withdrawn_reason,omitempty"`
	Versions        []Version  `json:"versions"`
}

// Show reads an object and its versions from the inventory (the ARK in
// any spelling). With a depositor, only that depositor's objects are
// shown: another's is "no object", as an unknown ARK (N24: a depositor
// learns nothing of others' objects, not even that they exist).
func Show(ctx context.Context, db *pgxpool.Pool, a, depositor string) (*Object, error) {
	held, err := Canonical(ctx, db, a)
	if err != nil {
		return nil, err
	}
	canon := cmp.Or(held, a)
	o := &Object{ARK: canon}
	err = db.QueryRow(ctx, `SELECT profile, local_id, title, withdrawn_at, withdrawn_reason FROM curator.inventory_objects o
		WHERE ark = $1 AND ($2 = '' OR EXISTS (SELECT 1 FROM curator.arks k WHERE k.ark = o.ark AND k.submitter = $2))`, canon, depositor).
		Scan(&o.Profile, &o.LocalID, &o.Title, &o.WithdrawnAt, &o.WithdrawnReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &ingest.InvalidError{Field: "ark", Msg: canon + " is no object of the inventory"}
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", canon, err)
	}
	rows, err := db.Query(ctx, `SELECT v.version, v.job_id, v.created_at, (SELECT count(*) FROM curator.inventory_files f WHERE f.ark = v.ark AND f.version = v.version),
		v.withdrawn_at, v.withdrawn_reason FROM curator.inventory_versions v WHERE v.ark = $1 ORDER BY v.version`, canon)
	if err != nil {
		return nil, fmt.Errorf("versions of %s: %w", canon, err)
	}
	o.Versions, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Version])
	return o, err
}
