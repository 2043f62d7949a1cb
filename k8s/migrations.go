package k8s

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// migrationSplit separates a migration's step (above) from its reversal.
const migrationSplit = "---- create above / drop below ----"

// contracting matches the statements that take away what a previous
// release may still use: a table, column, schema, type or function
// dropped, a name changed, a column's type changed, or a column made NOT
// NULL (an insert by a build that does not know it fails).
var contracting = regexp.MustCompile(`(?i)\b(DROP\s+(TABLE|COLUMN|SCHEMA|TYPE|FUNCTION|VIEW)|RENAME\s+(TO|COLUMN)|ALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE|SET\s+NOT\s+NULL)\b`)

// contractNote is how a migration that contracts says so: a comment
// `-- contract: WHY` naming what the previous release no longer needs
// (or that a rollback across it restores the database).
var contractNote = regexp.MustCompile(`(?m)^\s*--\s*contract:\s*\S`)

// CheckMigrations checks every migration under root (each migrations/
// folder's *.sql): migrations expand, so that the previous release runs
// on the newer schema (a rollback, and the old pods serving while the new
// start). A step that contracts (contracting) must say so with a
// `-- contract:` comment: the release notes and docs/DEPLOY.md's rollback
// depend on it.
func CheckMigrations(root string) error {
	var errs []error
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(p) != ".sql" || filepath.Base(filepath.Dir(p)) != "migrations" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		up, _, _ := strings.Cut(string(b), migrationSplit)
		var code []string
		for _, l := range strings.Split(up, "\n") {
			if c, _, _ := strings.Cut(l, "--"); strings.TrimSpace(c) != "" {
				code = append(code, c)
			}
		}
		if m := contracting.FindString(strings.Join(code, "\n")); m != "" && !contractNote.MatchString(up) {
			rel, _ := filepath.Rel(root, p)
			errs = append(errs, fmt.Errorf("%s: %q contracts the schema: the previous release may use what it takes away; expand now and contract a release later, or say why it is safe in a `-- contract:` comment", rel, m))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}
