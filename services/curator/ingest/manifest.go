package ingest

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
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
}

// ParseCheckm reads a checkm manifest (#%checkm_0.7): the #%fields line
// names the columns (nfo:fileUrl, nfo:hashAlgorithm, nfo:hashValue,
// nfo:fileSize, nfo:fileName, mrt:localIdentifier, mrt:title; without it
// the first column is the URL). Lines are '|'-separated. A row without a
// URL, or with a bad size, is an error naming its line.
func ParseCheckm(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	fields := []string{"nfo:fileurl"}
	var rows []Row
	n := 0
	sawHeader := false
	for sc.Scan() {
		n++
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
				fields = fields[:0]
				for _, f := range parts[1:] {
					fields = append(fields, strings.ToLower(f))
				}
			case "#%eof":
				return rows, nil
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
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
						return nil, fmt.Errorf("manifest line %d: file size %q is not a number", n, v)
					}
					row.Size = size
				}
			case "nfo:filename":
				row.Name = v
			case "mrt:localidentifier":
				row.LocalID = v
			case "mrt:title":
				row.Title = v
			}
		}
		if row.URL == "" {
			return nil, fmt.Errorf("manifest line %d: no file URL", n)
		}
		if err := httpURL(row.URL); err != nil {
			return nil, fmt.Errorf("manifest line %d: %q: %v", n, row.URL, err)
		}
		if row.DigestAlg != "" && !knownDigest(row.DigestAlg) {
			return nil, fmt.Errorf("manifest line %d: unknown hash algorithm %q", n, row.DigestAlg)
		}
		if row.Name == "" {
			u, _ := url.Parse(row.URL)
			row.Name = path.Base(u.Path)
		}
		if err := safeName(row.Name); err != nil {
			return nil, fmt.Errorf("manifest line %d: %v", n, err)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !sawHeader && len(rows) == 0 {
		return nil, fmt.Errorf("not a checkm manifest (no #%%checkm_0.7 line and no rows)")
	}
	return rows, nil
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

// safeName refuses a path inside an object that would escape it.
func safeName(name string) error {
	clean := path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains("/"+strings.ReplaceAll(name, "\\", "/")+"/", "/../") || clean == "/" {
		return fmt.Errorf("file name %q escapes the object", name)
	}
	return nil
}
