package identifier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
)

// EZID gives objects ARKs registered with EZID. A new ARK's number is
// taken from the curator's sequence and kept on the job first (as Local
// does), then created at EZID with the object's ERC metadata (PUT
// /id/ARK): a retry after a lost answer finds it there, and takes it if
// the account owns it, so an outage of EZID delays a job but never gives
// an object two identifiers, nor EZID an orphan. An object's later
// version updates its ARK's metadata. Supplied ARKs (primary) are the
// depositor's to register and are left alone.
type EZID struct {
	// DB is the curator's database.
	DB *pgxpool.Pool
	// Shoulder is the EZID shoulder ARKs are made in (INGEST_ARK_PREFIX).
	Shoulder string
	// Client is the account's EZID client.
	Client *EZIDClient
	// Target is the URL an ARK resolves to, "{ark}" replaced by the ARK
	// (INGEST_EZID_TARGET; "" lets EZID use its default).
	Target string
}

// Mint gives the job its ARK and has EZID hold it with erc.
func (e *EZID) Mint(ctx context.Context, j *ingest.JobRow, erc inventory.ERC) (string, error) {
	ark, err := assign(ctx, e.DB, j, e.Shoulder, "ezid")
	if err != nil {
		return "", err
	}
	var minter string
	var registered bool
	var firstJob int64
	if err := e.DB.QueryRow(ctx, `SELECT minter, registered_at IS NOT NULL, job_id FROM curator.arks WHERE ark = $1`, ark).Scan(&minter, &registered, &firstJob); err != nil {
		return "", fmt.Errorf("ark %s: %w", ark, err)
	}
	if minter != "ezid" {
		return ark, nil
	}
	meta := e.metadata(ark, erc)
	switch {
	case !registered:
		if err := e.register(ctx, ark, meta); err != nil {
			return "", err
		}
		if _, err := e.DB.Exec(ctx, `UPDATE curator.arks SET registered_at = now() WHERE ark = $1`, ark); err != nil {
			return "", fmt.Errorf("ark %s registered: %w", ark, err)
		}
	case firstJob != j.ID:
		// A new version: its metadata may say more (a new title).
		if err := e.Client.Update(ctx, ark, meta); err != nil {
			return "", err
		}
	}
	return ark, nil
}

// register creates ark at EZID; one EZID has already is taken if this
// account owns it (an earlier attempt's, whose answer was lost).
func (e *EZID) register(ctx context.Context, ark string, meta map[string]string) error {
	err := e.Client.Create(ctx, ark, meta)
	if !errors.Is(err, ErrExists) {
		return err
	}
	held, gerr := e.Client.Get(ctx, ark)
	if gerr != nil {
		return gerr
	}
	if owner := held["_owner"]; owner != e.Client.User {
		return fault.Permanent(fmt.Errorf("EZID holds %s for %q, not this account (%q): the shoulder is shared, or the sequence was reset", ark, owner, e.Client.User))
	}
	return e.Client.Update(ctx, ark, meta)
}

// metadata is what EZID is told of an object: its ERC, and where it is.
func (e *EZID) metadata(ark string, erc inventory.ERC) map[string]string {
	erc = erc.Filled()
	meta := map[string]string{
		"_profile": "erc",
		"_status":  "public",
		"erc.who":  erc.Who,
		"erc.what": erc.What,
		"erc.when": erc.When,
	}
	if e.Target != "" {
		meta["_target"] = strings.ReplaceAll(e.Target, "{ark}", ark)
	}
	return meta
}
