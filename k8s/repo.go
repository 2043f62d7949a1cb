package k8s

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// MaxTrackedFile is the largest file the repository may track outside test
// data: anything bigger is a binary or a dump committed by mistake, which
// every clone then carries for ever.
const MaxTrackedFile = 1 << 20

// CheckRepository checks the repository at root as git tracks it: no file
// over MaxTrackedFile but under a testdata folder, and the files a release
// needs (LICENSE, CHANGELOG.md, .dockerignore keeping .git out of the
// image's build context).
func CheckRepository(root string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	var errs []error
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" || strings.Contains("/"+name, "/testdata/") {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if fi.Size() > MaxTrackedFile {
			errs = append(errs, fmt.Errorf("%s: %d bytes tracked (at most %d outside testdata): a build output or dump? remove it and ignore it", name, fi.Size(), MaxTrackedFile))
		}
	}
	for _, f := range []string{"LICENSE", "CHANGELOG.md", ".dockerignore"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			errs = append(errs, fmt.Errorf("%s missing", f))
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, ".dockerignore")); err == nil && !regexp.MustCompile(`(?m)^/?\.git/?$`).Match(b) {
		errs = append(errs, errors.New(".dockerignore must keep .git out of the build context"))
	}
	return errors.Join(errs...)
}

var replaceLine = regexp.MustCompile(`(?m)^\s*(?:replace\s+)?\S+\s+=>\s+(\.\.?/\S*)\s*$`)

// checkModuleLayer: the Dockerfile builds each service as its own module
// (GOWORK=off) and downloads the modules before it copies the sources, so
// that a change to a source file does not download them again: every
// go.mod (and go.sum) a service's build reads is copied before `COPY . .`,
// and `go mod download` runs between the two.
func checkModuleLayer(dockerfile, text, root string) []error {
	var errs []error
	lines := strings.Split(text, "\n")
	all, download := -1, -1
	copied := map[string]bool{}
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "COPY" && f[1] == "." && f[2] == ".":
			if all < 0 {
				all = i
			}
		case len(f) > 0 && f[0] == "COPY" && all < 0:
			for _, p := range f[1:] {
				if strings.HasSuffix(p, "/go.mod") || strings.HasSuffix(p, "/go.sum") {
					copied[p] = true
				}
			}
		case strings.Contains(l, "go mod download") && all < 0:
			download = i
		}
	}
	if !strings.Contains(text, "GOWORK=off") {
		errs = append(errs, fmt.Errorf("%s: build each service as its own module (ENV GOWORK=off): the workspace names modules the image does not need", dockerfile))
	}
	if all < 0 {
		return append(errs, fmt.Errorf("%s: no COPY . .", dockerfile))
	}
	if download < 0 {
		errs = append(errs, fmt.Errorf("%s: no `go mod download` before COPY . .: every source change downloads the modules again", dockerfile))
	}
	// The modules the services' builds read: each service's own and those
	// its go.mod replaces with a folder of this repository.
	need := map[string]bool{}
	mods, _ := filepath.Glob(filepath.Join(root, "services", "*", "go.mod"))
	for _, m := range mods {
		dir, _ := filepath.Rel(root, filepath.Dir(m))
		need[filepath.ToSlash(dir)] = true
		b, err := os.ReadFile(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range replaceLine.FindAllSubmatch(b, -1) {
			rel, err := filepath.Rel(root, filepath.Join(filepath.Dir(m), string(bytes.TrimSpace(r[1]))))
			if err == nil {
				need[filepath.ToSlash(rel)] = true
			}
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(need)) {
		for _, f := range []string{dir + "/go.mod", dir + "/go.sum"} {
			if !copied[f] {
				errs = append(errs, fmt.Errorf("%s: %s is not copied before COPY . . (the module layer)", dockerfile, f))
			}
		}
	}
	return errs
}
