package identifier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
)

// EZID gives objects ARKs registered with EZID. A new ARK's number is
// taken from the curator's sequence and kept on the job first (as Local
// does), with a tag of its own, then created at EZID with the object's ERC
// metadata and the tag (PUT /id/ARK, archivist.tag). EZID answering that
// it has the identifier already means one of two things: an earlier
// attempt made it and its answer was lost (EZID holds the tag: it is
// taken), or the number is not this archive's to give (a shoulder shared
// with EZID's own minter or another application, or the database restored
// to before the number was taken: the tag differs), and the next number is
// minted instead, the identifier EZID holds left as it is. So an outage of
// EZID delays a job but never gives an object two identifiers, nor EZID an
// orphan, and no public identifier is ever pointed at another object. An
// object's later version updates its ARK's metadata. Supplied ARKs
// (primary) are the depositor's to register and are left alone.
type EZID struct {
	// Local is the numbering: DB, Shoulder (INGEST_ARK_PREFIX, EZID's
	// shoulder), Blob and Log.
	Local
	// Client is the account's EZID client.
	Client *EZIDClient
	// Target is the URL an ARK resolves to, "{ark}" replaced by the ARK
	// (INGEST_EZID_TARGET; "" lets EZID use its default).
	Target string
}

// tagElement is the metadata element a create's tag goes in.
const tagElement = "archivist.tag"

// maxTaken bounds the numbers one Mint skips because EZID holds them for
// someone else: more means the shoulder is not this archive's.
const maxTaken = 100

// Mint gives the job its ARK and has EZID hold it with erc.
func (e *EZID) Mint(ctx context.Context, j *ingest.JobRow, erc inventory.ERC) (string, error) {
	for taken := 0; ; taken++ {
		a, err := e.assign(ctx, j, "ezid")
		if err != nil {
			return "", err
		}
		var minter, tag string
		var registered bool
		var firstJob int64
		if err := e.DB.QueryRow(ctx, `SELECT minter, registered_at IS NOT NULL, job_id, tag FROM curator.arks WHERE ark = $1`, a).Scan(&minter, &registered, &firstJob, &tag); err != nil {
			return "", fmt.Errorf("ark %s: %w", a, err)
		}
		if minter != "ezid" {
			return a, nil
		}
		if tag == "" {
			// Numbered before tags were kept: a tag now, so that only what
			// this archive creates from here on is taken as its own.
			tag = newTag()
			if _, err := e.DB.Exec(ctx, `UPDATE curator.arks SET tag = $2 WHERE ark = $1 AND tag = ''`, a, tag); err != nil {
				return "", fmt.Errorf("ark %s: %w", a, err)
			}
			if err := e.DB.QueryRow(ctx, `SELECT tag FROM curator.arks WHERE ark = $1`, a).Scan(&tag); err != nil {
				return "", fmt.Errorf("ark %s: %w", a, err)
			}
		}
		meta := e.metadata(a, tag, erc)
		switch {
		case !registered:
			err := e.register(ctx, a, meta)
			if errors.Is(err, errNotOurs) {
				if taken >= maxTaken {
					return "", fault.Permanent(fmt.Errorf("EZID holds the next %d ARKs of %s for someone else: is the shoulder this archive's? (%w)", maxTaken, e.Shoulder, err))
				}
				if err := e.giveUp(ctx, a); err != nil {
					return "", err
				}
				e.Log.WarnContext(ctx, "ingest: EZID holds the ARK this number makes for someone else (a shared shoulder, or the database restored to before the number was taken); the next number is minted", "ark", a, "job", j.ID, "err", err)
				j.ARK = ""
				continue
			}
			if err != nil {
				return "", err
			}
			if _, err := e.DB.Exec(ctx, `UPDATE curator.arks SET registered_at = now() WHERE ark = $1`, a); err != nil {
				return "", fmt.Errorf("ark %s registered: %w", a, err)
			}
		case firstJob != j.ID:
			// A new version: its metadata may say more (a new title).
			if err := e.Client.Update(ctx, a, meta); err != nil {
				return "", err
			}
		}
		return a, nil
	}
}

// errNotOurs is an identifier EZID holds that this archive did not make.
var errNotOurs = errors.New("EZID holds it, not made by this archive")

// register creates ark at EZID; one EZID has already is taken only if it
// carries this create's tag (an earlier attempt's, whose answer was lost).
func (e *EZID) register(ctx context.Context, ark string, meta map[string]string) error {
	err := e.Client.Create(ctx, ark, meta)
	if !errors.Is(err, ErrExists) {
		return err
	}
	held, gerr := e.Client.Get(ctx, ark)
	if gerr != nil {
		return gerr
	}
	if held[tagElement] != meta[tagElement] || held["_owner"] != e.Client.User {
		return fmt.Errorf("%s, for %q, tag %q: %w", ark, held["_owner"], held[tagElement], errNotOurs)
	}
	return e.Client.Update(ctx, ark, meta)
}

// giveUp forgets an ARK that is not this archive's to give: no job keeps
// it (none went past processing, where it is registered), and its number
// is never given again (the sequence has moved on).
func (e *EZID) giveUp(ctx context.Context, a string) error {
	return pgx.BeginFunc(ctx, e.DB, func(tx pgx.Tx) error {
		if err := ingest.ForgetARK(ctx, tx, a); err != nil {
			return fmt.Errorf("give up %s: %w", a, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM curator.arks WHERE ark = $1 AND registered_at IS NULL`, a); err != nil {
			return fmt.Errorf("give up %s: %w", a, err)
		}
		return nil
	})
}

// metadata is what EZID is told of an object: its ERC, and where it is.
func (e *EZID) metadata(ark, tag string, erc inventory.ERC) map[string]string {
	erc = erc.Filled()
	meta := map[string]string{
		"_profile": "erc",
		"_status":  "public",
		"erc.who":  erc.Who,
		"erc.what": erc.What,
		"erc.when": erc.When,
		tagElement: tag,
	}
	if e.Target != "" {
		meta["_target"] = strings.ReplaceAll(e.Target, "{ark}", ark)
	}
	return meta
}
