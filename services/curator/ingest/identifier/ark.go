// Package identifier gives each object its ARK: the one its job has, the
// one its local identifier was given before, or a new one minted.
package identifier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Minter gives a job's object its ARK, keeping it on the job: a retry of
// the job, or another job of the same local identifier, gets the same.
type Minter interface {
	Mint(ctx context.Context, j *ingest.JobRow) (string, error)
}

// Local mints ARKs under a shoulder from the curator's own sequence,
// spelled as NOID does (digits and consonants, with a check character).
type Local struct {
	// DB is the curator's database.
	DB *pgxpool.Pool
	// Shoulder is the prefix of every ARK minted (INGEST_ARK_PREFIX).
	Shoulder string
}

// Mint gives the job its object's ARK: the one it has, the one its local
// id was given before, or a new one from the local minter, written to the
// job in the same statement that mints it.
func (l *Local) Mint(ctx context.Context, j *ingest.JobRow) (string, error) {
	if j.ARK != "" {
		return j.ARK, nil
	}
	var ark string
	if j.LocalID != "" {
		if err := l.DB.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE submitter = $1 AND profile = $2 AND local_id = $3`, j.Submitter, j.Profile, j.LocalID).Scan(&ark); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("ark of local id %s: %w", j.LocalID, err)
		}
	}
	if ark == "" {
		var n int64
		if err := l.DB.QueryRow(ctx, `SELECT nextval('curator.ark_seq')`).Scan(&n); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		ark = l.Shoulder + noid(n)
		// Minted and kept on the job by one statement: a crash keeps both or
		// neither (a lost number is a gap, never a second ARK).
		if _, err := l.DB.Exec(ctx, `WITH a AS (INSERT INTO curator.arks (ark, submitter, profile, local_id, job_id) VALUES ($1, $5, $2, $3, $4) RETURNING ark)
			UPDATE curator.jobs SET ark = a.ark FROM a WHERE id = $4 AND jobs.ark = ''`, ark, j.Profile, j.LocalID, j.ID, j.Submitter); err != nil {
			return "", fmt.Errorf("mint %s: %w", ark, err)
		}
		return ark, nil
	}
	if _, err := l.DB.Exec(ctx, `UPDATE curator.jobs SET ark = $2 WHERE id = $1 AND ark = ''`, j.ID, ark); err != nil {
		return "", fmt.Errorf("job %d keeps %s: %w", j.ID, ark, err)
	}
	return ark, nil
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
