package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, from this package.
const repoRoot = "../.."

// TestEveryReferenceResolves: a newcomer who clones the repository alone
// can follow every reference it makes. Every relative link of a Markdown
// file names a file of the repository (and a heading of it, if it names
// one); every docs/… page the code cites exists; every document named in
// capitals exists; a text file the code or docs name is the repository's,
// one the code writes, or a published design docs/designs.md summarizes;
// and nothing cites the workspace's system map, which is not the
// repository's.
func TestEveryReferenceResolves(t *testing.T) {
	designs, err := os.ReadFile(filepath.Join(repoRoot, "docs/designs.md"))
	if err != nil {
		t.Fatal(err)
	}
	mdLink := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docsPath := regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]+\.md`)
	capsDoc := regexp.MustCompile(`\b[A-Z][A-Z_-]+\.md\b`)
	design := regexp.MustCompile(`\b[a-z]+(?:-[a-z]+)+\.txt\b`)
	quotedTxt := regexp.MustCompile(`"([^"\s]*\.txt)"`)
	// Text files the repository has or its code writes (a name in a Go
	// string).
	known := map[string]bool{}
	headings := map[string]map[string]bool{}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	capsNames := map[string]bool{}
	var files []string
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			capsNames[d.Name()] = true
		}
		known[d.Name()] = true
		if (strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".go")) && !strings.Contains(p, string(filepath.Separator)+"testdata"+string(filepath.Separator)) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		if strings.HasSuffix(p, ".go") {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range quotedTxt.FindAllStringSubmatch(string(b), -1) {
				known[filepath.Base(m[1])] = true
			}
		}
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		rel, _ := filepath.Rel(repoRoot, p)
		// The changelog is history: it may name what was since removed.
		if rel == "CHANGELOG.md" {
			continue
		}
		if strings.Contains(text, "SYSTEM"+"-MAP") {
			t.Errorf("%s cites the workspace's system map, which is not in the repository: cite docs/adr", rel)
		}
		for _, m := range capsDoc.FindAllString(text, -1) {
			if !capsNames[m] {
				t.Errorf("%s names %s, which is not in the repository", rel, m)
			}
		}
		for _, m := range design.FindAllString(text, -1) {
			if !known[m] && !strings.Contains(string(designs), "`"+m+"`") {
				t.Errorf("%s cites %s, which docs/designs.md does not summarize", rel, m)
			}
		}
		if strings.HasSuffix(p, ".go") {
			for _, m := range docsPath.FindAllString(text, -1) {
				if !exists(filepath.Join(repoRoot, m)) {
					t.Errorf("%s cites %s, which does not exist", rel, m)
				}
			}
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), file)
				if !exists(dest) {
					t.Errorf("%s links to %s, which does not exist", rel, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if headings[dest] == nil {
				headings[dest] = anchorsOf(t, dest)
			}
			if !headings[dest][anchor] {
				t.Errorf("%s links to %s, whose heading #%s does not exist", rel, target, anchor)
			}
		}
	}
}

// anchorsOf is the anchors of a Markdown file's headings, as GitHub makes
// them: lower case, spaces to hyphens, punctuation dropped, a repeat
// numbered.
func anchorsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				a.WriteRune(r)
			case r == ' ':
				a.WriteRune('-')
			}
		}
		s := a.String()
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}
