// Package devkit_test checks what the dev kit promises the services.
package devkit_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoServiceLinksTheDevKit: no service's binary depends on the dev kit,
// the embedded NATS server or the S3 stand-in; only `archivist` (whose dev
// command runs the whole system) and tests do.
func TestNoServiceLinksTheDevKit(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list the services' dependencies: %v", err)
	}
	services, err := filepath.Glob("../services/*/main.go")
	if err != nil || len(services) < 8 {
		t.Fatalf("services: %v %v", services, err)
	}
	for _, m := range services {
		dir := filepath.Dir(m)
		if filepath.Base(dir) == "archivist" {
			continue
		}
		cmd := exec.Command("go", "list", "-deps", ".")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps in %s: %v\n%s", dir, err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.Contains(pkg, "nats-server") || strings.Contains(pkg, "gofakes3") || strings.HasPrefix(pkg, "github.com/archivist/archivist/devkit") {
				t.Errorf("%s links %s", filepath.Base(dir), pkg)
			}
		}
	}
}
