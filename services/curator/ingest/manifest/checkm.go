// Package manifest reads checkm manifests, the lists of files and objects a
// depositor submits, within bounds, and says which names an object may hold.
package manifest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/archivist/archivist/services/curator/ingest/ark"
)

// Row is one line of a checkm manifest, by field.
type Row struct {
	URL       string
	DigestAlg string
	Digest    string
	Size      int64
	Name      string
	LocalID   string
	Title     string
	// Primary is the object's ARK the depositor supplies
	// (mrt:primaryIdentifier; "" if none).
	Primary string
}

// Limits bound what a checkm manifest may hold; a manifest breaking
// one fails its batch with an error naming the bound.
type Limits struct {
	// MaxBytes is the most bytes of one manifest (after any transfer
	// decompression).
	MaxBytes int64
	// MaxRows is the most rows of one manifest.
	MaxRows int
	// MaxLine is the longest line.
	MaxLine int
	// Object says the rows are the files of one object, so no two may
	// share a file name. In a batch-manifest or a manifest of manifests
	// each row is an object of its own, and names repeat freely (every
	// object may have its cover.jpg, every sub-manifest be manifest.checkm).
	Object bool
}

// DefaultLimits are a manifest's bounds where none are configured.
var DefaultLimits = Limits{MaxBytes: 16 << 20, MaxRows: 100_000, MaxLine: 64 << 10}

// ScanCheckm reads a checkm manifest (#%checkm_0.7) row by row, handing
// each to fn, within lim: the #%fields line names the columns
// (nfo:fileUrl, nfo:hashAlgorithm, nfo:hashValue, nfo:fileSize,
// nfo:fileName, mrt:localIdentifier, mrt:title, mrt:primaryIdentifier;
// without it the first
// column is the URL). Lines are '|'-separated. A row without a URL, with a
// bad size or an unsafe file name, a name repeated within one object's
// manifest (lim.Object), and a manifest breaking a bound, is an error
// naming its line.
func ScanCheckm(r io.Reader, lim Limits, fn func(Row) error) error {
	lr := &io.LimitedReader{R: r, N: lim.MaxBytes + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, min(64<<10, lim.MaxLine+1)), lim.MaxLine+1)
	fields := []string{"nfo:fileurl"}
	names := map[string]int{}
	rows := 0
	n := 0
	sawHeader := false
	for sc.Scan() {
		n++
		if lr.N <= 0 {
			return fmt.Errorf("manifest larger than %d bytes (INGEST_MAX_MANIFEST_BYTES)", lim.MaxBytes)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#%") {
			parts := splitBar(line)
			switch strings.ToLower(parts[0]) {
			case "#%checkm_0.7", "#%checkm":
				sawHeader = true
			case "#%fields":
				if len(parts) > 64 {
					return fmt.Errorf("manifest line %d: more than 64 fields", n)
				}
				fields = fields[:0]
				for _, f := range parts[1:] {
					fields = append(fields, strings.ToLower(f))
				}
			case "#%eof":
				return nil
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if rows == lim.MaxRows {
			return fmt.Errorf("manifest line %d: more than %d rows (INGEST_MAX_MANIFEST_ROWS)", n, lim.MaxRows)
		}
		parts := splitBar(line)
		var row Row
		for i, f := range fields {
			if i >= len(parts) {
				break
			}
			v := parts[i]
			switch f {
			case "nfo:fileurl":
				row.URL = v
			case "nfo:hashalgorithm":
				row.DigestAlg = strings.ToLower(v)
			case "nfo:hashvalue":
				row.Digest = strings.ToLower(v)
			case "nfo:filesize":
				if v != "" {
					size, err := strconv.ParseInt(v, 10, 64)
					if err != nil || size < 0 {
						return fmt.Errorf("manifest line %d: file size %q is not a number", n, truncate(v, 40))
					}
					row.Size = size
				}
			case "nfo:filename":
				row.Name = v
			case "mrt:localidentifier":
				row.LocalID = v
			case "mrt:title":
				row.Title = v
			case "mrt:primaryidentifier":
				row.Primary = v
			}
		}
		if row.URL == "" {
			return fmt.Errorf("manifest line %d: no file URL", n)
		}
		if err := CheckURL(row.URL); err != nil {
			return fmt.Errorf("manifest line %d: %q: %v", n, truncate(row.URL, 200), err)
		}
		if row.DigestAlg != "" && !knownDigest(row.DigestAlg) {
			return fmt.Errorf("manifest line %d: unknown hash algorithm %q", n, truncate(row.DigestAlg, 40))
		}
		if row.Name == "" {
			u, _ := url.Parse(row.URL)
			row.Name = path.Base(u.Path)
		}
		if err := SafeName(row.Name); err != nil {
			return fmt.Errorf("manifest line %d: %v", n, err)
		}
		if err := checkText(row.LocalID, "local identifier"); err != nil {
			return fmt.Errorf("manifest line %d: %v", n, err)
		}
		if err := checkText(row.Title, "title"); err != nil {
			return fmt.Errorf("manifest line %d: %v", n, err)
		}
		if row.Primary != "" {
			if err := CheckARK(row.Primary); err != nil {
				return fmt.Errorf("manifest line %d: primary identifier %.80q: %v", n, row.Primary, err)
			}
		}
		if lim.Object {
			if first, dup := names[row.Name]; dup {
				return fmt.Errorf("manifest line %d: file name %q is also on line %d", n, truncate(row.Name, 200), first)
			}
			names[row.Name] = n
		}
		rows++
		if err := fn(row); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("manifest line %d: longer than %d bytes", n+1, lim.MaxLine)
		}
		return err
	}
	if lr.N <= 0 {
		return fmt.Errorf("manifest larger than %d bytes (INGEST_MAX_MANIFEST_BYTES)", lim.MaxBytes)
	}
	if !sawHeader && rows == 0 {
		return fmt.Errorf("not a checkm manifest (no #%%checkm_0.7 line and no rows)")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// checkText refuses text PostgreSQL cannot store or a person cannot read:
// invalid UTF-8, NUL and other control characters, more than 4 KiB.
func checkText(s, what string) error {
	switch {
	case len(s) > 4096:
		return fmt.Errorf("%s longer than 4096 bytes", what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not valid UTF-8", what, truncate(s, 80))
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%s %q holds a control character", what, truncate(s, 80))
	}
	return nil
}

func splitBar(line string) []string {
	parts := strings.Split(line, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func knownDigest(alg string) bool {
	switch alg {
	case "md5", "sha1", "sha-1", "sha256", "sha-256", "sha512", "sha-512":
		return true
	}
	return false
}

// SafeName refuses a path inside an object that would escape it, and one
// the object's checkm manifest could not list or a file system could not
// hold: '|', control characters, invalid UTF-8, more than 1024 bytes or a
// segment of more than 255.
func SafeName(name string) error {
	clean := path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains("/"+strings.ReplaceAll(name, "\\", "/")+"/", "/../") || clean == "/" {
		return fmt.Errorf("file name %q escapes the object", truncate(name, 200))
	}
	if len(name) > 1024 {
		return fmt.Errorf("file name longer than 1024 bytes")
	}
	for _, seg := range strings.Split(name, "/") {
		if len(seg) > 255 {
			return fmt.Errorf("file name %q has a part longer than 255 bytes", truncate(name, 200))
		}
	}
	if strings.Contains(name, "|") {
		return fmt.Errorf("file name %q holds '|', the manifest's separator", truncate(name, 200))
	}
	return checkText(name, "file name")
}

// CheckURL refuses what is not an absolute http or https URL: the only
// URLs a submission or a manifest may name.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("an http or https URL")
	}
	return nil
}

// CheckARK refuses what is not an ARK (ark:/NAAN/NAME, at most 256 bytes;
// package ark).
func CheckARK(s string) error { return ark.Check(s) }
