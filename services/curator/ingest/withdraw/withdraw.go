// Package withdraw takes an object, or one version of it, out of the
// archive at an operator's request: the withdrawal is recorded with its
// reason, the inventory keeps the object as a tombstone (when, why), and
// every file no version still held keeps is announced deleted
// (archive.object.deleted: the auditor's content index lets it go, so
// its next check is the outcome table's row 11; the aggregator takes a
// WARC's lines out of the index) and deleted from the store.
package withdraw

import (
	"context"
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
	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// Request is a withdrawal.
type Request struct {
	ARK string `json:"ark"`
	// Version is the version withdrawn (0: every version, the object).
	Version int    `json:"version,omitempty"`
	Reason  string `json:"reason"`
	// By is who asked (the caller).
	By string `json:"-"`
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
}

// Withdrawer withdraws.
type Withdrawer struct {
	DB   *pgxpool.Pool
	Blob blob.Store
	Bus  *bus.Bus
	Log  *slog.Logger
}

// Withdraw withdraws what r names. It is idempotent: asked again (after a
// crash halfway, say), it announces and deletes whatever of the withdrawn
// versions' files is left.
func (w *Withdrawer) Withdraw(ctx context.Context, r Request) (*Result, error) {
	if err := manifest.CheckARK(r.ARK); err != nil {
		return nil, &ingest.InvalidError{Field: "ark", Msg: err.Error()}
	}
	if r.Version < 0 {
		return nil, &ingest.InvalidError{Field: "version", Msg: "a version number, or 0 for every version"}
	}
	if strings.TrimSpace(r.Reason) == "" || len(r.Reason) > 2000 {
		return nil, &ingest.InvalidError{Field: "reason", Msg: "required, at most 2000 bytes: the tombstone says why"}
	}
	res := &Result{ARK: r.ARK}
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
		if _, err := tx.Exec(ctx, `UPDATE curator.inventory_versions SET withdrawn_at = now(), withdrawn_reason = $3
			WHERE ark = $1 AND ($2 = 0 OR version = $2) AND withdrawn_at IS NULL`, r.ARK, r.Version, r.Reason); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE curator.inventory_objects SET withdrawn_at = now(), withdrawn_reason = $2
			WHERE ark = $1 AND withdrawn_at IS NULL AND NOT EXISTS (SELECT 1 FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NULL)`,
			r.ARK, r.Reason); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO curator.withdrawals (ark, version, reason, by_whom) VALUES ($1, $2, $3, $4)`, r.ARK, r.Version, r.Reason, r.By); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version FROM curator.inventory_versions WHERE ark = $1 AND withdrawn_at IS NOT NULL ORDER BY version`, r.ARK)
		if err != nil {
			return err
		}
		if res.Versions, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT withdrawn_at IS NOT NULL FROM curator.inventory_objects WHERE ark = $1`, r.ARK).Scan(&res.Object); err != nil {
			return err
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
	if err != nil {
		return nil, fmt.Errorf("withdraw %s: %w", r.ARK, err)
	}
	// Announced, then deleted: a crash in between is finished by asking
	// again (the announcements are de-duplicated by key).
	var out []bus.Outgoing
	for _, key := range res.Deleted {
		env, err := events.New("curator", &events.ObjectDeleted{Object: key})
		if err != nil {
			return nil, err
		}
		env.ID = "deleted:" + key
		out = append(out, bus.Outgoing{Subject: events.SubjectObjectDeleted, Envelope: env})
	}
	if err := w.Bus.PublishBatch(ctx, out); err != nil {
		return nil, fmt.Errorf("withdraw %s: announce: %w", r.ARK, err)
	}
	for _, key := range res.Deleted {
		if err := w.Blob.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return nil, fmt.Errorf("withdraw %s: delete %s: %w", r.ARK, key, err)
		}
	}
	w.Log.WarnContext(ctx, "ingest: withdrawn", "ark", r.ARK, "version", r.Version, "by", r.By, "reason", r.Reason, "files_deleted", len(res.Deleted), "object", res.Object)
	return res, nil
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

// Show reads an object and its versions from the inventory.
func Show(ctx context.Context, db *pgxpool.Pool, ark string) (*Object, error) {
	o := &Object{ARK: ark}
	err := db.QueryRow(ctx, `SELECT profile, local_id, title, withdrawn_at, withdrawn_reason FROM curator.inventory_objects WHERE ark = $1`, ark).
		Scan(&o.Profile, &o.LocalID, &o.Title, &o.WithdrawnAt, &o.WithdrawnReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &ingest.InvalidError{Field: "ark", Msg: ark + " is no object of the inventory"}
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", ark, err)
	}
	rows, err := db.Query(ctx, `SELECT v.version, v.job_id, v.created_at, (SELECT count(*) FROM curator.inventory_files f WHERE f.ark = v.ark AND f.version = v.version),
		v.withdrawn_at, v.withdrawn_reason FROM curator.inventory_versions v WHERE v.ark = $1 ORDER BY v.version`, ark)
	if err != nil {
		return nil, fmt.Errorf("versions of %s: %w", ark, err)
	}
	o.Versions, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Version])
	return o, err
}
