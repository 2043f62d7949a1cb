// Package identifier gives each object its ARK: the one its job has, the
// one its local identifier was given before, or a new one minted.
package identifier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
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
}

// Mint gives the job its object's ARK (see assign).
func (l *Local) Mint(ctx context.Context, j *ingest.JobRow, _ inventory.ERC) (string, error) {
	return assign(ctx, l.DB, j, l.Shoulder, "local")
}

// assign gives the job its object's ARK and keeps it on the job: the one
// it has; else the one its local identifier was given before, which a
// supplied ARK (primary) must be; else the supplied one, which must not be
// another depositor's or collection's, nor another local identifier's;
// else a new one from the sequence, recorded as minted by minter, written
// to the job in the same statement that takes the number (a crash keeps
// both or neither: a lost number is a gap, never a second ARK). A supplied
// ARK that cannot be the object's fails the job, for good.
func assign(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, shoulder, minter string) (string, error) {
	if j.ARK != "" {
		return j.ARK, nil
	}
	var ark string
	if j.LocalID != "" {
		if err := db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE submitter = $1 AND profile = $2 AND local_id = $3`, j.Submitter, j.Profile, j.LocalID).Scan(&ark); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("ark of local id %s: %w", j.LocalID, err)
		}
		if ark != "" && j.Primary != "" && ark != j.Primary {
			return "", fault.Permanent(fmt.Errorf("local id %q is %s, not the supplied %s", j.LocalID, ark, j.Primary))
		}
	}
	if ark == "" && j.Primary != "" {
		// A new object under the depositor's own ARK takes it; one the
		// archive has must be this depositor's, in this collection, and of
		// no other local identifier.
		tag, err := db.Exec(ctx, `INSERT INTO curator.arks (ark, submitter, profile, local_id, job_id, minter)
			VALUES ($1, $2, $3, $4, $5, 'supplied') ON CONFLICT DO NOTHING`, j.Primary, j.Submitter, j.Profile, j.LocalID, j.ID)
		if err != nil {
			return "", fmt.Errorf("job %d takes the supplied %s: %w", j.ID, j.Primary, err)
		}
		if tag.RowsAffected() == 0 {
			var submitter, profile, localID string
			if err := db.QueryRow(ctx, `SELECT submitter, profile, local_id FROM curator.arks WHERE ark = $1`, j.Primary).Scan(&submitter, &profile, &localID); err != nil {
				return "", fmt.Errorf("the supplied %s: %w", j.Primary, err)
			}
			switch {
			case submitter != j.Submitter || profile != j.Profile:
				return "", fault.Permanent(fmt.Errorf("the supplied %s is an object of another depositor or collection", j.Primary))
			case localID != "" && j.LocalID != "" && localID != j.LocalID:
				return "", fault.Permanent(fmt.Errorf("the supplied %s is local id %q, not %q", j.Primary, localID, j.LocalID))
			}
		}
		ark = j.Primary
	}
	if ark == "" {
		var n int64
		if err := db.QueryRow(ctx, `SELECT nextval('curator.ark_seq')`).Scan(&n); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		ark = shoulder + noid(n)
		if _, err := db.Exec(ctx, `WITH a AS (INSERT INTO curator.arks (ark, submitter, profile, local_id, job_id, minter) VALUES ($1, $5, $2, $3, $4, $6) RETURNING ark)
			UPDATE curator.jobs SET ark = a.ark FROM a WHERE id = $4 AND jobs.ark = ''`, ark, j.Profile, j.LocalID, j.ID, j.Submitter, minter); err != nil {
			return "", fmt.Errorf("mint %s: %w", ark, err)
		}
		j.ARK = ark
		return ark, nil
	}
	return keep(ctx, db, j, ark)
}

// keep writes ark to the job (unless it has one) and returns the job's.
func keep(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, ark string) (string, error) {
	if err := db.QueryRow(ctx, `UPDATE curator.jobs SET ark = CASE WHEN ark = '' THEN $2 ELSE ark END WHERE id = $1 RETURNING ark`, j.ID, ark).Scan(&j.ARK); err != nil {
		return "", fmt.Errorf("job %d keeps %s: %w", j.ID, ark, err)
	}
	return j.ARK, nil
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
