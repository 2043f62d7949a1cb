package composetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
)

// published is a release of this tree (tools/release) pushed to a local
// registry (Debian's docker-registry) for every platform, which the
// compose tests pull by digest and run.
type published struct {
	registry string // HOST:PORT
	version  string
	Release  struct {
		Registry string `json:"registry"`
		Images   map[string]struct {
			Ref       string            `json:"ref"`
			Digest    string            `json:"digest"`
			Platforms map[string]string `json:"platforms"`
			SBOM      string            `json:"sbom"`
		} `json:"images"`
		Chart struct {
			Ref    string `json:"ref"`
			Digest string `json:"digest"`
		} `json:"chart"`
	}
	stop func()
}

var (
	publishOnce sync.Once
	release     *published
	publishErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if release != nil && release.stop != nil {
		release.stop()
	}
	os.Exit(code)
}

// publish releases the tree to a local registry once for the package's
// tests, pulls every image by its digest and tags it as compose runs it
// (archivist/<service>:composetest), and builds the stand-ins of the
// official NATS, PostgreSQL and MinIO images (scripts/images).
func publish(t *testing.T, env []string) *published {
	t.Helper()
	publishOnce.Do(func() { release, publishErr = publishRelease(t, env) })
	if publishErr != nil {
		t.Fatal(publishErr)
	}
	return release
}

func publishRelease(t *testing.T, env []string) (*published, error) {
	t0 := time.Now()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return nil, fmt.Errorf("the compose tests run a release pulled from a local registry: install Debian's docker-registry (.ci/run does): %w", err)
	}
	dir, err := os.MkdirTemp("", "archivist-registry-")
	if err != nil {
		return nil, err
	}
	port := testenv.FreePort(t)
	p := &published{registry: fmt.Sprintf("127.0.0.1:%d", port), version: fmt.Sprintf("0.0.0-composetest.%d", os.Getpid())}
	config := fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s/data\nhttp:\n  addr: %s\nlog:\n  level: warn\n", dir, p.registry)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(config), 0o644); err != nil {
		return nil, err
	}
	reg := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	logf, _ := os.Create(filepath.Join(dir, "registry.log"))
	reg.Stdout, reg.Stderr = logf, logf
	if err := reg.Start(); err != nil {
		return nil, fmt.Errorf("start docker-registry: %w", err)
	}
	p.stop = func() {
		reg.Process.Kill()
		reg.Wait()
		os.RemoveAll(dir)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get("http://" + p.registry + "/v2/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("docker-registry did not answer on %s", p.registry)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dist := filepath.Join(dir, "dist")
	cmd := exec.Command("go", "run", "./tools/release", "--version", p.version, "--registry", p.registry+"/archivist", "--plain-http", "--dist", dist)
	cmd.Dir, cmd.Env = root, env
	if out, err := cmd.CombinedOutput(); err != nil {
		return p, fmt.Errorf("tools/release: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dist, "release.json"))
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p.Release); err != nil {
		return p, err
	}
	t.Logf("%-56s %6.1f s", "released to "+p.registry+" (tools/release)", time.Since(t0).Seconds())
	t0 = time.Now()
	for svc, img := range p.Release.Images {
		if out, err := exec.Command("docker", "pull", img.Ref).CombinedOutput(); err != nil {
			return p, fmt.Errorf("docker pull %s: %v\n%s", img.Ref, err, out)
		}
		if out, err := exec.Command("docker", "tag", img.Ref, "archivist/"+svc+":composetest").CombinedOutput(); err != nil {
			return p, fmt.Errorf("docker tag %s: %v\n%s", img.Ref, err, out)
		}
	}
	t.Logf("%-56s %6.1f s", "pulled by digest", time.Since(t0).Seconds())
	t0 = time.Now()
	images := exec.Command(filepath.Join(root, "scripts/images"))
	images.Env = append(env, "ARCHIVIST_IMAGES=standins")
	if out, err := images.CombinedOutput(); err != nil {
		return p, fmt.Errorf("scripts/images (the stand-ins): %v\n%s", err, out)
	}
	t.Logf("%-56s %6.1f s", "stand-ins built (scripts/images)", time.Since(t0).Seconds())
	return p, nil
}

// get fetches a registry path with the Accept header.
func (p *published) get(t *testing.T, path, accept string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.registry+"/v2/"+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// What a release pushes is small (manifests, configs, SBOMs, a chart
	// of tens of KiB): more is a fault.
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistryRead+1))
	if err != nil || len(b) > maxRegistryRead {
		t.Fatalf("GET %s: %d bytes read (at most %d): %v", path, len(b), maxRegistryRead, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return b
}

// maxRegistryRead bounds what the test reads of one registry answer.
const maxRegistryRead = 8 << 20

const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
)

type descriptor struct {
	MediaType    string            `json:"mediaType"`
	ArtifactType string            `json:"artifactType"`
	Digest       string            `json:"digest"`
	Platform     map[string]string `json:"platform"`
	Annotations  map[string]string `json:"annotations"`
}

type manifest struct {
	Config      descriptor        `json:"config"`
	Layers      []descriptor      `json:"layers"`
	Manifests   []descriptor      `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

// TestReleaseIsPublished: the release pushed every image as an index of
// linux/amd64 and linux/arm64, each with the OCI labels and an SPDX SBOM
// attached, and the chart as an OCI artifact whose values pin every image
// by the digest pushed; docker pulled each image by that digest (publish).
func TestReleaseIsPublished(t *testing.T) {
	skipUnlessAsked(t)
	t.Parallel()
	p := publish(t, baseEnv())
	if len(p.Release.Images) != 9 {
		t.Fatalf("%d images released, want 9 (every service and the CLI)", len(p.Release.Images))
	}
	for svc, img := range p.Release.Images {
		repo := "archivist/" + svc
		var idx manifest
		if err := json.Unmarshal(p.get(t, repo+"/manifests/"+img.Digest, ociIndex), &idx); err != nil {
			t.Fatal(err)
		}
		arch := map[string]bool{}
		for _, m := range idx.Manifests {
			arch[m.Platform["architecture"]] = m.Platform["os"] == "linux"
			var im manifest
			if err := json.Unmarshal(p.get(t, repo+"/manifests/"+m.Digest, ociManifest), &im); err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				Architecture string `json:"architecture"`
				Config       struct {
					User   string            `json:"User"`
					Labels map[string]string `json:"Labels"`
				} `json:"config"`
			}
			if err := json.Unmarshal(p.get(t, repo+"/blobs/"+im.Config.Digest, ""), &cfg); err != nil {
				t.Fatal(err)
			}
			l := cfg.Config.Labels
			if cfg.Architecture != m.Platform["architecture"] || cfg.Config.User != "65532:65532" || l["org.opencontainers.image.version"] != p.version ||
				l["org.opencontainers.image.source"] == "" || l["org.opencontainers.image.revision"] == "" || l["org.opencontainers.image.created"] == "" {
				t.Errorf("%s %s: config %+v", svc, m.Platform["architecture"], cfg)
			}
		}
		if !arch["amd64"] || !arch["arm64"] {
			t.Errorf("%s: the index holds %v, want linux/amd64 and linux/arm64", svc, arch)
		}
		// The SBOM: a referrer of the index (the registry has no
		// referrers API: the tag schema, sha256-<digest>).
		var refs manifest
		if err := json.Unmarshal(p.get(t, repo+"/manifests/"+strings.Replace(img.Digest, ":", "-", 1), ociIndex), &refs); err != nil {
			t.Fatal(err)
		}
		if len(refs.Manifests) != 1 || refs.Manifests[0].ArtifactType != "application/spdx+json" || refs.Manifests[0].Digest != img.SBOM {
			t.Fatalf("%s: referrers %+v, want the SBOM %s", svc, refs.Manifests, img.SBOM)
		}
		var sm manifest
		if err := json.Unmarshal(p.get(t, repo+"/manifests/"+img.SBOM, ociManifest), &sm); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			SPDXVersion string `json:"spdxVersion"`
			Packages    []struct {
				Name string `json:"name"`
			} `json:"packages"`
		}
		if err := json.Unmarshal(p.get(t, repo+"/blobs/"+sm.Layers[0].Digest, ""), &doc); err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, pk := range doc.Packages {
			names[pk.Name] = true
		}
		if doc.SPDXVersion != "SPDX-2.3" || !names["github.com/archivist/archivist/services/"+svc] || !names["github.com/nats-io/nats.go"] || !names["golang"] {
			t.Errorf("%s: SBOM %s with %d packages, want its module, nats.go and Go", svc, doc.SPDXVersion, len(doc.Packages))
		}
	}
	// The chart, by the digest pushed: its values pin every image.
	var cm manifest
	if err := json.Unmarshal(p.get(t, "archivist/charts/archivist/manifests/"+p.Release.Chart.Digest, ociManifest), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" || len(cm.Layers) == 0 {
		t.Fatalf("the chart's manifest: %+v", cm)
	}
	values := chartFile(t, p.get(t, "archivist/charts/archivist/blobs/"+cm.Layers[0].Digest, ""), "archivist/values.yaml")
	if !strings.Contains(values, "  registry: "+p.registry+"/archivist\n") || !strings.Contains(values, fmt.Sprintf("  tag: %q\n", p.version)) {
		t.Errorf("the chart's values do not name the release's registry and tag:\n%.600s", values)
	}
	for svc, img := range p.Release.Images {
		if !strings.Contains(values, "    "+svc+": "+img.Digest+"\n") {
			t.Errorf("the chart's values do not pin %s at %s", svc, img.Digest)
		}
	}
	// The helm command k8s/go.mod pins (go tool helm) renders the chart
	// it pulls from the registry.
	helm := exec.Command("go", "tool", "helm", "template", "archivist", "oci://"+p.registry+"/archivist/charts/archivist", "--version", p.version, "--plain-http", "--kube-version", "1.30.0")
	helm.Dir = filepath.Join(root, "k8s")
	out, err := helm.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template of the pushed chart: %v\n%s", err, out)
	}
	if want := p.registry + "/archivist/curator:" + p.version + "@" + p.Release.Images["curator"].Digest; !bytes.Contains(out, []byte("image: "+want)) {
		t.Errorf("helm template of the pushed chart does not run the curator at %s", want)
	}
}

// chartFile is a file of a packaged chart (a .tgz).
func chartFile(t *testing.T, tgz []byte, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the chart: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(io.LimitReader(tr, maxRegistryRead+1))
			if err != nil || len(b) > maxRegistryRead {
				t.Fatalf("%s in the chart: %d bytes read (at most %d): %v", name, len(b), maxRegistryRead, err)
			}
			return string(b)
		}
	}
}
