// Package inventory is what an object version is made of: where its files
// are kept (Key), the files ingest adds to the producer's (SystemFiles:
// ERC, Dublin Core, the storage manifest), the version a job stores and
// its hold on the object meanwhile (Hold), and the files a version in mode
// add carries from the previous one (Carried).
package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// xmlEscape is s as XML character data.
func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// Key is where a file of an object version lives in the blob store: under
// the object's storage prefix (Prefix), "v<N>/", then the file's path in
// the version. No other (ARK, version, path) maps to it.
func Key(a string, version int, path string) string {
	return fmt.Sprintf("%sv%d/%s", Prefix(a), version, path)
}

// Prefix is the storage prefix of the object a names (ark.StoragePrefix;
// an identifier the archive holds always has one). The keys of objects
// stored before #47 dropped every ':' and turned '/' into '_': their files
// keep those keys (the inventory names each file's), their later versions
// go under this prefix.
func Prefix(a string) string {
	p, err := ark.StoragePrefix(a)
	if err != nil {
		// Not an ARK by today's rules (never one the archive assigns): its
		// spelling, every byte escaped as StoragePrefix does, which no ARK
		// maps to (those begin "ark:" and a NAAN, no '%').
		var b strings.Builder
		b.WriteString("objects/")
		for i := 0; i < len(a); i++ {
			fmt.Fprintf(&b, "%%%02X", a[i])
		}
		return b.String() + "/"
	}
	return p
}

// SystemFile is a file ingest adds to the producer's.
type SystemFile struct {
	Name string
	Body []byte
}

// ERC is what an object's kernel metadata says of it: who made it,
// what it is, when.
type ERC struct {
	Who, What, When string
}

// Filled is e with ERC's code for a value unavailable, "(:unav)", where
// it says nothing.
func (e ERC) Filled() ERC {
	for _, v := range []*string{&e.Who, &e.What, &e.When} {
		if strings.TrimSpace(*v) == "" {
			*v = "(:unav)"
		}
	}
	return e
}

// SystemFiles are the object's ERC, Dublin Core and checkm storage
// manifest, in that order, made from the processed job and what its
// batch says of it.
func SystemFiles(j *ingest.JobRow, e ERC) []SystemFile {
	filled := e.Filled()
	erc := fmt.Sprintf("erc:\nwho: %s\nwhat: %s\nwhen: %s\nwhere: %s\n", filled.Who, filled.What, filled.When, j.ARK)
	dc := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<dc xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n"+
		"  <dc:creator>%s</dc:creator>\n  <dc:title>%s</dc:title>\n  <dc:date>%s</dc:date>\n  <dc:identifier>%s</dc:identifier>\n</dc>\n",
		xmlEscape(e.Who), xmlEscape(e.What), xmlEscape(e.When), xmlEscape(j.ARK))
	out := []SystemFile{{"mrt-erc.txt", []byte(erc)}, {"mrt-dc.xml", []byte(dc)}}
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%fields | nfo:fileName | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize\n")
	for _, f := range j.Files {
		fmt.Fprintf(&m, "producer/%s | sha256 | %s | %d\n", f.Name, f.SHA256, f.Size)
	}
	for _, f := range out {
		s := sha256.Sum256(f.Body)
		fmt.Fprintf(&m, "system/%s | sha256 | %s | %d\n", f.Name, hex.EncodeToString(s[:]), len(f.Body))
	}
	m.WriteString("#%eof\n")
	return append(out, SystemFile{"mrt-manifest.checkm", []byte(m.String())})
}

// ErrWait is Hold's answer while another job stores a version of the
// object, or a withdrawal of it waits for that job: the job waits (it is
// no failed attempt) and asks again.
var ErrWait = errors.New("another job is storing a version of the object, or a withdrawal of it waits")

// WithdrawnError refuses a deposit into an object withdrawn: only an
// operator's reinstatement lets it take deposits again.
type WithdrawnError struct {
	ARK    string
	At     time.Time
	Reason string
}

func (e *WithdrawnError) Error() string {
	return fmt.Sprintf("%s was withdrawn at %s (%s): a deposit into it needs an operator to reinstate it first (archivist object reinstate %s)",
		e.ARK, e.At.UTC().Format(time.RFC3339), e.Reason, e.ARK)
}

// Hold gives the job the version it stores of its object, and with it the
// object: one job at a time stores a version of an object, the one whose
// version is the last given out, while it is storing or recording. A job
// that has a number keeps it while it is still the last (a retry); one
// whose number was passed by another's (it failed meanwhile, and was
// requeued) gets the next, as a job without one does once no other job
// holds the object and no withdrawal waits for it (ErrWait till then). A
// new number is one the store holds nothing under (a database restored to
// before it was given would give it again). A withdrawn object takes no
// version (WithdrawnError, permanent). Numbers passed over are gaps:
// versions increase, but need not be consecutive.
func Hold(ctx context.Context, db *pgxpool.Pool, bs blob.Store, j *ingest.JobRow) (int, error) {
	var version int
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// The object's row is its lock, for holds and withdrawals alike.
		if _, err := tx.Exec(ctx, `INSERT INTO curator.ark_versions (ark, last)
			VALUES ($1, coalesce((SELECT versions FROM curator.inventory_objects WHERE ark = $1), 0)) ON CONFLICT (ark) DO NOTHING`, j.ARK); err != nil {
			return err
		}
		// The lock first, then what it guards, in a statement of its own:
		// under READ COMMITTED a statement that waited for the row sees
		// the row as the withdrawal committed it but the object's and its
		// versions' rows as its snapshot had them before, so a deposit
		// waiting on a withdrawal found the hold cleared and the object
		// not withdrawn, and stored a version of a withdrawn object
		// (TestWithdrawalWaitsForTheVersionBeingStored, red in CI once;
		// TestAHoldWaitingOnAWithdrawalSeesIt forces it).
		if _, err := tx.Exec(ctx, `SELECT 1 FROM curator.ark_versions WHERE ark = $1 FOR UPDATE`, j.ARK); err != nil {
			return err
		}
		var last, recorded int
		var waiting bool
		var withdrawnAt *time.Time
		var reason string
		if err := tx.QueryRow(ctx, `SELECT v.last, coalesce(v.withdrawal_until > now(), false),
				coalesce((SELECT max(version) FROM curator.inventory_versions WHERE ark = $1), 0),
				o.withdrawn_at, coalesce(o.withdrawn_reason, '')
			FROM curator.ark_versions v LEFT JOIN curator.inventory_objects o USING (ark) WHERE v.ark = $1`, j.ARK).
			Scan(&last, &waiting, &recorded, &withdrawnAt, &reason); err != nil {
			return err
		}
		if withdrawnAt != nil {
			return fault.Permanent(&WithdrawnError{ARK: j.ARK, At: *withdrawnAt, Reason: reason})
		}
		held, err := ingest.JobVersion(ctx, tx, j.ID)
		if err != nil {
			return err
		}
		version = held
		if version != 0 && version == last && version > recorded {
			return nil // its own number, still the last: a retry
		}
		holder, err := ingest.VersionHolder(ctx, tx, j.ARK, last, j.ID)
		switch {
		case err != nil:
			return err
		case holder != 0 || waiting:
			return ErrWait
		}
		version = max(last, recorded)
		for {
			version++
			found, err := blob.ListAfter(ctx, bs, fmt.Sprintf("%sv%d/", Prefix(j.ARK), version), "", 1)
			if err != nil {
				return fmt.Errorf("is v%d in the store: %w", version, err)
			}
			if len(found) == 0 {
				break
			}
			// Stored, then forgotten by the database (a restore): never
			// given again.
		}
		if _, err := tx.Exec(ctx, `UPDATE curator.ark_versions SET last = $2 WHERE ark = $1`, j.ARK, version); err != nil {
			return err
		}
		return ingest.SetJobVersion(ctx, tx, j.ID, version)
	})
	if err != nil {
		if errors.Is(err, ErrWait) {
			return 0, err
		}
		return 0, fmt.Errorf("version of %s for job %d: %w", j.ARK, j.ID, err)
	}
	j.Version = version
	return version, nil
}

// Abandon gives up the job's version (its files were refused by the store,
// which holds other bytes under it): the next Hold gives it a new number.
func Abandon(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow) error {
	if err := ingest.AbandonJobVersion(ctx, db, j.ID, j.Version); err != nil {
		return fmt.Errorf("abandon v%d of %s: %w", j.Version, j.ARK, err)
	}
	j.Version = 0
	return nil
}

// Carried are the files of the object's latest recorded version (not
// withdrawn) before version that the job does not replace (by name), each
// with the key it is stored under. Asked while the job holds the object
// (Hold), the answer stays true until the job records its version.
func Carried(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, version int) ([]ingest.File, error) {
	replaced := make(map[string]bool, len(j.Files))
	for _, f := range j.Files {
		if f.Key == "" {
			replaced[f.Name] = true
		}
	}
	rows, err := db.Query(ctx, `SELECT substr(path, 10), key, size, sha256 FROM curator.inventory_files
		WHERE ark = $1 AND path LIKE 'producer/%' AND version = (SELECT max(version) FROM curator.inventory_versions WHERE ark = $1 AND version < $2 AND withdrawn_at IS NULL)
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

// File is a file of a version as the inventory records it.
type File struct {
	// Path is its path in the version (producer/NAME or system/NAME).
	Path string
	// Key is where it is stored: under this version, or, carried, under
	// the version that stored it.
	Key    string
	SHA256 string
	Size   int64
	// Carried says an earlier version stored (and announced) it.
	Carried bool
}

// Record writes the job's version into the inventory, in tx (the move to
// notify): the object (its versions count; never its withdrawal, which
// only an operator's reinstatement lifts), the version with its storage
// manifest, and its files, in one round trip. A retry writes nothing
// twice.
func Record(ctx context.Context, tx pgx.Tx, j *ingest.JobRow, files []File) error {
	var b pgx.Batch
	b.Queue(`INSERT INTO curator.inventory_objects (ark, profile, local_id, title, versions) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (ark) DO UPDATE SET versions = greatest(inventory_objects.versions, EXCLUDED.versions), updated_at = now()`,
		j.ARK, j.Profile, j.LocalID, j.Title, j.Version)
	b.Queue(`INSERT INTO curator.inventory_versions (ark, version, job_id, manifest_key) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, j.ARK, j.Version, j.ID, Key(j.ARK, j.Version, "system/mrt-manifest.checkm"))
	for _, f := range files {
		b.Queue(`INSERT INTO curator.inventory_files (ark, version, path, key, size, sha256) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`, j.ARK, j.Version, f.Path, f.Key, f.Size, f.SHA256)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("inventory of %s v%d: %w", j.ARK, j.Version, err)
	}
	return nil
}
