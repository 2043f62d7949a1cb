package k8s_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/k8s"
)

// TestDeployBuildsEveryImage: DEPLOY.md's build loop makes the image of
// every service the chart deploys and the CLI's (the migrations); it once
// left the dashboard out, whose pods then could not be pulled.
func TestDeployBuildsEveryImage(t *testing.T) {
	b, err := os.ReadFile("../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^for s in ([a-z ]+); do`).FindSubmatch(b)
	if m == nil {
		t.Fatal("DEPLOY.md has no build loop (for s in ...; do)")
	}
	built := strings.Fields(string(m[1]))
	for _, svc := range append(k8s.Deployed(), "archivist") {
		if !slices.Contains(built, svc) {
			t.Errorf("DEPLOY.md's build loop does not build %s", svc)
		}
	}
}
