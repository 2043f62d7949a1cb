// Package identifier gives each object its ARK: the one its job has, the
// one its local identifier was given before, or a new one minted.
package identifier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Minter gives a job's object its ARK, keeping it on the job: a retry of
// the job, or another job of the same local identifier, gets the same.
type Minter interface {
	Mint(ctx context.Context, j *ingest.JobRow, erc inventory.ERC) (string, error)
}

// Local mints ARKs under a shoulder from the curator's own sequence,
// spelled as NOID does (digits and consonants, with a check character).
type Local struct {
	// DB is the curator's database.
	DB *pgxpool.Pool
	// Shoulder is the prefix of every ARK minted (INGEST_ARK_PREFIX).
	Shoulder string
	// Blob is the archive's store, asked before a number is given out
	// whether an object of that ARK is already there (its database was
	// restored to before the number was taken): such a number is skipped.
	Blob blob.Store
	// Log says which numbers were skipped.
	Log *slog.Logger
}

// Mint gives the job its object's ARK (see assign).
func (l *Local) Mint(ctx context.Context, j *ingest.JobRow, _ inventory.ERC) (string, error) {
	return l.assign(ctx, j, "local")
}

// assign gives the job its object's ARK and keeps it on the job: the one
// it has; else the one its local identifier was given before, which a
// supplied ARK (primary) must be a spelling of; else the supplied one
// (supplied), else a new one from the sequence, recorded as minted by
// minter, written to the job in the same statement that takes the number
// (a crash keeps both or neither: a lost number is a gap, never a second
// ARK). ARKs are compared in normal form (package ark): a job given a
// spelling of an ARK the archive holds gets the ARK as first spelt. A
// supplied ARK that cannot be the object's fails the job, for good.
func (l *Local) assign(ctx context.Context, j *ingest.JobRow, minter string) (string, error) {
	db := l.DB
	if j.ARK != "" {
		return j.ARK, nil
	}
	var held string
	if j.LocalID != "" {
		if err := db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE submitter = $1 AND profile = $2 AND local_id = $3`, j.Submitter, j.Profile, j.LocalID).Scan(&held); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("ark of local id %s: %w", j.LocalID, err)
		}
		if held != "" && j.Primary != "" && !ark.Same(held, j.Primary) {
			return "", fault.Permanent(fmt.Errorf("local id %q is %s, not the supplied %s", j.LocalID, held, j.Primary))
		}
	}
	if held == "" && j.Primary != "" {
		var err error
		if held, err = supplied(ctx, db, j, l.Shoulder); err != nil {
			return "", err
		}
	}
	if held != "" {
		return keep(ctx, db, j, held)
	}
	return l.mint(ctx, j, minter)
}

// supplied gives the job the ARK its depositor supplied (a new object's
// kept in normal form, "ark:NAAN/NAME"): an object the archive has under
// that identifier (any spelling) must be this
// depositor's, in this collection, and of no other local identifier; an
// ARK that names no object yet the depositor may take only under a
// shoulder or NAAN its key names (the batch's ark_shoulders), and never
// under the archive's own shoulder, whose numbers only its minter gives.
func supplied(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, shoulder string) (string, error) {
	norm, err := ark.Normalize(j.Primary)
	if err != nil {
		return "", fault.Permanent(fmt.Errorf("the supplied %q: %w", j.Primary, err))
	}
	var held, submitter, profile, localID string
	err = db.QueryRow(ctx, `SELECT ark, submitter, profile, local_id FROM curator.arks WHERE norm = $1`, norm).Scan(&held, &submitter, &profile, &localID)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := mayTake(ctx, db, j, shoulder); err != nil {
			return "", err
		}
		// Kept in its normal form: one spelling for the archive's records,
		// whatever spelling the depositor used.
		prefix, _ := ark.StoragePrefix(norm)
		tag, err := db.Exec(ctx, `INSERT INTO curator.arks (ark, norm, storage_prefix, submitter, profile, local_id, job_id, minter)
			VALUES ($1, $1, $2, $3, $4, $5, $6, 'supplied') ON CONFLICT DO NOTHING`, norm, prefix, j.Submitter, j.Profile, j.LocalID, j.ID)
		if err != nil {
			return "", fmt.Errorf("job %d takes the supplied %s: %w", j.ID, j.Primary, err)
		}
		if tag.RowsAffected() == 1 {
			return norm, nil
		}
		// Taken meanwhile (another job of it, or of its local id): the
		// next attempt sees by whom.
		return "", fmt.Errorf("job %d: the supplied %s was taken meanwhile", j.ID, j.Primary)
	}
	if err != nil {
		return "", fmt.Errorf("the supplied %s: %w", j.Primary, err)
	}
	switch {
	case submitter != j.Submitter || profile != j.Profile:
		return "", fault.Permanent(fmt.Errorf("the supplied %s is an object of another depositor or collection", j.Primary))
	case localID != "" && j.LocalID != "" && localID != j.LocalID:
		return "", fault.Permanent(fmt.Errorf("the supplied %s is local id %q, not %q", j.Primary, localID, j.LocalID))
	}
	return held, nil
}

// mayTake refuses the job's supplied ARK, which names no object yet, when
// it lies under the archive's own shoulder or under none of the shoulders
// its batch's depositor may supply ARKs under.
func mayTake(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, shoulder string) error {
	if shoulder != "" && ark.Under(j.Primary, shoulder) {
		return fault.Permanent(fmt.Errorf("the supplied %s is under the archive's own shoulder %s, whose ARKs only its minter gives", j.Primary, shoulder))
	}
	b, err := ingest.BatchOf(ctx, db, j.BatchID)
	if err != nil {
		return fmt.Errorf("the shoulders of batch %d: %w", j.BatchID, err)
	}
	if !b.ShouldersKept {
		return nil // a batch submitted before shoulders were kept
	}
	list := b.ARKShoulders
	for _, s := range strings.Split(list, ",") {
		if s == AnyShoulder || s != "" && ark.Under(j.Primary, s) {
			return nil
		}
	}
	if list == "" {
		return fault.Permanent(fmt.Errorf("the supplied %s names no object, and the depositor's key may supply none (its keys-file line has no arks=…, or its token no ARK shoulders)", j.Primary))
	}
	return fault.Permanent(fmt.Errorf("the supplied %s names no object, and is under none of the shoulders the depositor's key may supply ARKs under (%s)", j.Primary, list))
}

// AnyShoulder in a depositor's shoulders lets it supply ARKs under every
// NAAN but the archive's own shoulder.
const AnyShoulder = "*"

// mint gives the job a new ARK from the sequence, minted by minter, with
// a tag of its own (which EZID's creates carry). A number whose ARK
// already has objects in the store, or names an object of the archive
// (the database restored to before it was given), is skipped.
func (l *Local) mint(ctx context.Context, j *ingest.JobRow, minter string) (string, error) {
	db, bs, shoulder := l.DB, l.Blob, l.Shoulder
	tag := newTag()
	for {
		var n int64
		if err := db.QueryRow(ctx, `SELECT nextval('curator.ark_seq')`).Scan(&n); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		a := shoulder + noid(n)
		norm, err := ark.Normalize(a)
		if err != nil {
			return "", fault.Permanent(fmt.Errorf("mint %s: INGEST_ARK_PREFIX makes no ARK: %w", a, err))
		}
		prefix := inventory.Prefix(a)
		if bs != nil {
			found, err := blob.ListAfter(ctx, bs, prefix, "", 1)
			if err != nil {
				return "", fmt.Errorf("mint %s: is it in the store: %w", a, err)
			}
			if len(found) > 0 {
				l.Log.WarnContext(ctx, "ingest: an ARK the sequence gave out again already has objects in the store (was the database restored?); its number is skipped",
					"ark", a, "object", found[0].Key, "job", j.ID)
				continue
			}
		}
		// The ARK recorded, and given to the job unless it has one, in one
		// transaction.
		var kept string
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			added, err := tx.Exec(ctx, `INSERT INTO curator.arks (ark, norm, storage_prefix, submitter, profile, local_id, job_id, minter, tag)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`, a, norm, prefix, j.Submitter, j.Profile, j.LocalID, j.ID, minter, tag)
			if err != nil || added.RowsAffected() == 0 {
				return err
			}
			kept, err = ingest.KeepARK(ctx, tx, j.ID, a)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("mint %s: %w", a, err)
		}
		if kept != a {
			has, err := ingest.JobARK(ctx, db, j.ID)
			if err != nil {
				return "", fmt.Errorf("mint %s: %w", a, err)
			}
			var taken bool
			if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM curator.arks WHERE norm = $1 OR storage_prefix = $2)`, norm, prefix).Scan(&taken); err != nil {
				return "", fmt.Errorf("mint %s: %w", a, err)
			}
			switch {
			case has != "":
				j.ARK = has // another attempt of the job gave it one
				return has, nil
			case !taken:
				// Another job of its local id got one meanwhile: the next
				// attempt takes that.
				return "", fmt.Errorf("mint for job %d: local id %q got its ARK meanwhile", j.ID, j.LocalID)
			}
			l.Log.WarnContext(ctx, "ingest: an ARK the sequence gave out again is the archive's already (was the database restored?); its number is skipped", "ark", a, "job", j.ID)
			continue
		}
		j.ARK = a
		return a, nil
	}
}

// newTag is a tag no other mint has: 128 random bits in hex.
func newTag() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keep writes ark to the job (unless it has one) and returns the job's.
func keep(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, ark string) (string, error) {
	kept, err := ingest.KeepARK(ctx, db, j.ID, ark)
	if err != nil {
		return "", err
	}
	j.ARK = kept
	return kept, nil
}

// noid spells n in the NOID alphabet (digits and consonants) with its
// check character.
func noid(n int64) string {
	const xdigits = "0123456789bcdfghjkmnpqrstvwxz"
	var s []byte
	for {
		s = append([]byte{xdigits[n%29]}, s...)
		n /= 29
		if n == 0 {
			break
		}
	}
	for len(s) < 6 {
		s = append([]byte{'0'}, s...)
	}
	sum := 0
	for i, c := range s {
		sum += (i + 1) * strings.IndexByte(xdigits, c)
	}
	return string(s) + string(xdigits[sum%29])
}
