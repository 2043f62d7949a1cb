package k8s_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"

	"github.com/archivist/archivist/k8s"
)

// chartSets are both charts' value sets: the defaults and each of ci/.
func chartSets(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, dir := range []string{chartDir, natsChartDir} {
		files, err := filepath.Glob(filepath.Join(dir, "ci", "*-values.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no value sets in %s/ci: %v", dir, err)
		}
		out[dir] = append([]string{""}, files...)
	}
	return out
}

// allowedWarning is the one lint warning a chart may have: the NATS
// side's dependency, the official NATS chart, which helm dependency build
// fetches from its repository (there is none to reach offline).
func allowedWarning(dir string, m support.Message) bool {
	return dir == natsChartDir && m.Severity == support.WarningSev && strings.Contains(m.Err.Error(), "missing these dependencies: nats")
}

// TestChartsLint: Helm's own linter (helm lint: the chart file, values
// against the schema, the templates rendered, deprecated APIs,
// dependencies) passes both charts with every value set, as strict as
// --strict but for the NATS side's dependency being fetched later.
func TestChartsLint(t *testing.T) {
	kube, err := chartutil.ParseKubeVersion(k8s.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for dir, sets := range chartSets(t) {
		for _, f := range sets {
			t.Run(filepath.Base(dir)+"/"+filepath.Base(f), func(t *testing.T) {
				values := map[string]any{}
				if f != "" {
					if values, err = k8s.ReadValues(f); err != nil {
						t.Fatal(err)
					}
				}
				l := lint.AllWithKubeVersion(dir, values, "archive-prod", kube)
				for _, m := range l.Messages {
					if m.Severity >= support.WarningSev && !allowedWarning(dir, m) {
						t.Errorf("%s", m)
					}
				}
			})
		}
	}
}

// TestHelmBinary: the helm command itself (the version k8s/go.mod pins
// as a tool, built by go build from the module cache) lints and renders
// both charts with every value set, into a namespace of any name.
func TestHelmBinary(t *testing.T) {
	helm := filepath.Join(t.TempDir(), "helm")
	if out, err := exec.Command("go", "build", "-o", helm, "helm.sh/helm/v3/cmd/helm").CombinedOutput(); err != nil {
		t.Fatalf("build the helm tool k8s/go.mod pins: %v\n%s", err, out)
	}
	for dir, sets := range chartSets(t) {
		if dir == natsChartDir {
			dir = withDependencyStandIn(t, dir)
		}
		for _, f := range sets {
			args := []string{"--kube-version", k8s.KubeVersion}
			if f != "" {
				args = append(args, "-f", f)
			}
			name := filepath.Base(dir) + "/" + filepath.Base(f)
			out, err := exec.Command(helm, append([]string{"lint", dir, "--namespace", "archive-prod"}, args...)...).CombinedOutput()
			if err != nil {
				t.Errorf("helm lint %s: %v\n%s", name, err, out)
			}
			out, err = exec.Command(helm, append([]string{"template", "archivist", dir, "--namespace", "archive-prod"}, args...)...).Output()
			if err != nil {
				t.Errorf("helm template %s: %v\n%s", name, err, errText(err))
				continue
			}
			docs := 0
			for _, d := range strings.Split(string(out), "\n---") {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
					t.Errorf("helm template %s: %v", name, err)
				}
				if obj["kind"] != nil {
					docs++
				}
			}
			if docs == 0 {
				t.Errorf("helm template %s rendered nothing", name)
			}
		}
	}
}

// withDependencyStandIn copies the NATS side's chart with a stand-in for
// its dependency, the official NATS chart, which helm dependency build
// fetches from its repository (none is reached offline): an empty chart of
// its name and version, so that helm renders this chart's own objects.
func withDependencyStandIn(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(out, "charts", "nats")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := "apiVersion: v2\nname: nats\nversion: 1.3.0\ndescription: a stand-in for the official NATS chart (offline)\n"
	if err := os.WriteFile(filepath.Join(sub, "Chart.yaml"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return fmt.Sprint(err)
}
