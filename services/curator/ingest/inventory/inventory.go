// Package inventory is what an object version is made of: where its files
// are kept (Key), the files ingest adds to the producer's (SystemFiles:
// ERC, Dublin Core, the storage manifest), the next version number
// (AllocateVersion), and the files a version in mode add carries from the
// previous one (Carried).
package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"strings"

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

// AllocateVersion gives the job the next version number of its object and
// keeps it on the job, in one transaction: two jobs of one ARK get two
// numbers, and a retry of the job keeps its number.
func AllocateVersion(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow) (int, error) {
	var version int
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
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

// Carried are the files of the object's latest recorded version (not
// withdrawn) before
// version that the job does not replace (by name), each with the key it is
// stored under.
func Carried(ctx context.Context, db *pgxpool.Pool, j *ingest.JobRow, version int) ([]ingest.File, error) {
	replaced := make(map[string]bool, len(j.Files))
	for _, f := range j.Files {
		replaced[f.Name] = true
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
