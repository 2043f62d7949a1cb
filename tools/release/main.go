// Command release builds Archivist's images for every platform, pushes
// them and the Helm chart to an OCI registry, and writes the digests into
// the chart's values:
//
//	go run ./tools/release --version 0.3.0 --registry registry.example.net/archivist
//
// For each service (and the archivist CLI) it cross-compiles the static
// binary (scripts/build-service) for linux/amd64 and linux/arm64, makes an
// image of it FROM scratch (the layers scripts/images makes: the users,
// CA certificates and /tmp; the directories the service writes, owned by
// the user it runs as; the binary), with the OCI labels (title, version,
// revision, created, source, licenses), pushes one manifest per platform
// and an index over them tagged with the version, and attaches an SPDX
// SBOM of the binary's modules as a referrer of the index (the registry's
// referrers API, or the tag schema where it has none). Then it packages
// charts/archivist with the version and the images' registry, tag and
// digests in its values.yaml, and pushes it as an OCI artifact
// (REGISTRY/charts/archivist:VERSION). It writes DIST/release.json (every
// digest) and DIST/values.yaml (image.registry, tag and digests, for
// helm -f). The digests are of the content alone: the same commit builds
// the same images.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Release is what a release pushed (DIST/release.json).
type Release struct {
	Version  string           `json:"version"`
	Registry string           `json:"registry"`
	Revision string           `json:"revision"`
	Images   map[string]Image `json:"images"`
	Chart    Chart            `json:"chart"`
}

// Image is one service's image: its index and what hangs from it.
type Image struct {
	// Ref is the index's reference by digest: REGISTRY/NAME@sha256:...
	Ref string `json:"ref"`
	// Digest is the index's: what the chart pins.
	Digest string `json:"digest"`
	// Platforms are the manifests' digests by platform (linux/arm64).
	Platforms map[string]string `json:"platforms"`
	// SBOM is the SPDX document's manifest, a referrer of the index.
	SBOM string `json:"sbom"`
}

// Chart is the pushed chart.
type Chart struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// Services are the images a release builds: every service and the CLI.
var Services = []string{"archivist", "curator", "pwa", "cwa", "researcher", "indexer", "aggregator", "auditor", "dashboard"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	flag.StringVar(&o.version, "version", "", "the release's version (SemVer, without v): the images' tag and the chart's version")
	flag.StringVar(&o.registry, "registry", "", "where the images go: HOST[:PORT]/PATH (REGISTRY/SERVICE, REGISTRY/charts/archivist)")
	flag.BoolVar(&o.plainHTTP, "plain-http", false, "speak HTTP to the registry (a local one)")
	flag.StringVar(&o.dist, "dist", "dist", "where release.json and values.yaml are written")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the platforms each image is built for")
	services := flag.String("services", strings.Join(Services, ","), "the images built")
	flag.Parse()
	if o.version == "" || o.registry == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	o.platforms = strings.Split(*platforms, ",")
	o.services = strings.Split(*services, ",")
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("not in the repository: %w", err)
	}
	o.root = strings.TrimSpace(string(root))
	if o.revision, o.created, err = revision(o.root); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rel, err := release(ctx, o, log)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dist, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rel, "", "  ")
	if err := os.WriteFile(filepath.Join(o.dist, "release.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dist, "values.yaml"), []byte(valuesYAML(rel)), 0o644); err != nil {
		return err
	}
	log.Info("released", "version", rel.Version, "registry", rel.Registry, "chart", rel.Chart.Ref+"@"+rel.Chart.Digest, "dist", o.dist)
	return nil
}

type options struct {
	version, registry, dist, root, revision string
	created                                 time.Time
	plainHTTP                               bool
	platforms, services                     []string
}

// revision is the commit built and its time (the images' created: the
// same commit, the same images), with "+dirty" for uncommitted changes.
func revision(root string) (string, time.Time, error) {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("git log: %w", err)
	}
	f := strings.Fields(string(out))
	sec, _ := strconv.ParseInt(f[1], 10, 64)
	rev := f[0]
	if st, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); len(st) > 0 {
		rev += "+dirty"
	}
	return rev, time.Unix(sec, 0).UTC(), nil
}

// release builds and pushes every image, then the chart.
func release(ctx context.Context, o options, log *slog.Logger) (*Release, error) {
	rel := &Release{Version: o.version, Registry: o.registry, Revision: o.revision, Images: map[string]Image{}}
	work, err := os.MkdirTemp("", "archivist-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	for _, svc := range o.services {
		img, err := buildAndPush(ctx, o, work, svc, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", svc, err)
		}
		rel.Images[svc] = img
	}
	c, err := pushChart(o, rel, work)
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	rel.Chart = c
	return rel, nil
}

// valuesYAML is the chart's image block for the release.
func valuesYAML(rel *Release) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Archivist %s (%s): helm upgrade --install archivist oci://%s/charts/archivist --version %s -f this-file\n",
		rel.Version, rel.Revision, rel.Registry, rel.Version)
	fmt.Fprintf(&b, "image:\n  registry: %s\n  tag: %q\n%s", rel.Registry, rel.Version, digestsYAML(rel))
	return b.String()
}

// digestsYAML is the values' image.digests block (two spaces in) for the
// images released.
func digestsYAML(rel *Release) string {
	var b strings.Builder
	b.WriteString("  digests:\n")
	for _, svc := range Services {
		if img, ok := rel.Images[svc]; ok {
			fmt.Fprintf(&b, "    %s: %s\n", svc, img.Digest)
		}
	}
	return b.String()
}
