package manifest_test

import (
	"io"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// TestParseCheckm reads fields by the #%fields line and names the line of
// a bad row.
func TestParseCheckm(t *testing.T) {
	rows, err := parseCheckm(strings.NewReader("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName | mrt:localIdentifier\n" +
		"http://h/a | MD5 | ABC | 3 | dir/a.txt | loc1\nhttp://h/b.wav\n#%eof\nhttp://ignored/after/eof\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0] != (manifest.Row{URL: "http://h/a", DigestAlg: "md5", Digest: "abc", Size: 3, Name: "dir/a.txt", LocalID: "loc1"}) || rows[1].Name != "b.wav" {
		t.Errorf("rows %+v", rows)
	}
	for in, want := range map[string]string{
		"#%checkm_0.7\nftp://h/a\n": "line 2",
		"#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileSize\nhttp://h/a | many\n":                          "file size \"many\"",
		"#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\nhttp://h/a | ../../etc/passwd\n":              "escapes the object",
		"#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue\nhttp://h/a | crc7 | 1\n": "unknown hash algorithm",
		"just words\n": "line 1",
	} {
		if _, err := parseCheckm(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}

// FuzzCheckm: no manifest makes the parser panic or return a row that is
// unsafe to store: every row has an http(s) URL and a safe, distinct name.
func FuzzCheckm(f *testing.F) {
	f.Add("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName | mrt:localIdentifier\nhttp://h/a | md5 | abc | 3 | dir/a.txt | loc1\n#%eof\n")
	f.Add("#%checkm_0.7\nhttp://h/a\nhttps://h/b.wav\n")
	f.Add("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\nhttp://h/a | ../../etc/passwd\n")
	f.Add("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\nhttp://h/a | x.txt\nhttp://h/b | x.txt\n")
	f.Add("just words\n")
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := parseCheckm(strings.NewReader(in))
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, r := range rows {
			if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
				t.Fatalf("row URL %q", r.URL)
			}
			if r.Name == "" || strings.HasPrefix(r.Name, "/") || strings.Contains("/"+r.Name+"/", "/../") || strings.ContainsAny(r.Name, "|\x00\n") || names[r.Name] {
				t.Fatalf("unsafe or repeated name %q", r.Name)
			}
			names[r.Name] = true
		}
	})
}

// parseCheckm reads a whole checkm manifest of one object's files within
// DefaultLimits.
func parseCheckm(r io.Reader) ([]manifest.Row, error) {
	var rows []manifest.Row
	lim := manifest.DefaultLimits
	lim.Object = true
	err := manifest.ScanCheckm(r, lim, func(row manifest.Row) error {
		rows = append(rows, row)
		return nil
	})
	return rows, err
}
