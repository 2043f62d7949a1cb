package k8s_test

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
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

// TestDeployCreatesWhatTheChartNeeds: DEPLOY.md's install from an empty
// cluster makes the namespaces and the API keys' Secret before the chart,
// which mounts it (a step once missing: every API pod waited for it).
func TestDeployCreatesWhatTheChartNeeds(t *testing.T) {
	b, err := os.ReadFile("../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	install := strings.Index(text, "helm upgrade --install archivist charts/archivist")
	for _, step := range []string{"kubectl create namespace", "create secret generic archivist-api-keys", "helm upgrade --install nats charts/archivist-nats"} {
		if i := strings.Index(text, step); i < 0 || install < 0 || i > install {
			t.Errorf("DEPLOY.md: %q is not a step before the chart's install", step)
		}
	}
}

// TestStandInImagesHaveNamesOfTheirOwn: scripts/images builds its NATS and
// PostgreSQL stand-ins under the project's names, never the official ones
// (which they would shadow on a developer's engine), and compose runs
// them only when asked.
func TestStandInImagesHaveNamesOfTheirOwn(t *testing.T) {
	b, err := os.ReadFile("../scripts/images")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^build (\S+) `).FindAllSubmatch(b, -1) {
		name := string(m[1])
		if !strings.HasPrefix(name, `"archivist/`) && !strings.HasPrefix(name, "archivist-ci/") {
			t.Errorf("scripts/images builds %s: a stand-in takes a name of the project's (archivist-ci/...)", name)
		}
	}
	c, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"image: ${NATS_IMAGE:-nats:2-alpine}", "image: ${POSTGRES_IMAGE:-postgres:15-alpine}"} {
		if !strings.Contains(string(c), want) {
			t.Errorf("compose.yaml lacks %q", want)
		}
	}
}

// TestLeaderSessionsMatchTheCode: the connection budget counts, for each
// service, one session per loop it leads (env.AsLeader), each outside its
// pool; the count is the services' code's.
func TestLeaderSessionsMatchTheCode(t *testing.T) {
	leads := regexp.MustCompile(`\.AsLeader\("`)
	found := map[string]int{}
	err := filepath.WalkDir("../services", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := len(leads.FindAll(b, -1)); n > 0 {
			svc := strings.Split(filepath.ToSlash(path), "/")[2]
			found[svc] += n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no service leads a loop: the search is wrong")
	}
	if !maps.Equal(found, k8s.LeaderSessions) {
		t.Errorf("leader sessions per service in the code %v, in the connection budget %v", found, k8s.LeaderSessions)
	}
}

// TestMigrationsExpand: every migration expands the schema or says why
// its contraction is safe; a DROP COLUMN, a rename or a SET NOT NULL
// without the note is refused.
func TestMigrationsExpand(t *testing.T) {
	if err := k8s.CheckMigrations(".."); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{
		"ALTER TABLE s.t DROP COLUMN c;",
		"ALTER TABLE s.t RENAME COLUMN a TO b;",
		"ALTER TABLE s.t ALTER COLUMN c SET NOT NULL;",
		"ALTER TABLE s.t ALTER COLUMN c TYPE bigint;",
		"DROP TABLE s.t;",
	} {
		dir := filepath.Join(t.TempDir(), "svc", "migrations")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		text := "-- a step\nCREATE TABLE s.u (id int);\n" + step + "\n\n---- create above / drop below ----\n\nDROP TABLE s.u;\n"
		if err := os.WriteFile(filepath.Join(dir, "002_step.sql"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		root := filepath.Dir(filepath.Dir(dir))
		if err := k8s.CheckMigrations(root); err == nil || !strings.Contains(err.Error(), "contracts the schema") {
			t.Errorf("%s: %v, want it refused", step, err)
		}
		noted := strings.Replace(text, "-- a step\n", "-- a step\n-- contract: nothing reads s.t since 0.1.0\n", 1)
		if err := os.WriteFile(filepath.Join(dir, "002_step.sql"), []byte(noted), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := k8s.CheckMigrations(root); err != nil {
			t.Errorf("%s with its contract note: %v", step, err)
		}
	}
}
