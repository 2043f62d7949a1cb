package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestReleaseValues: the chart's values.yaml, comments kept, names the
// release's registry and tag and pins every image by its digest; a values
// file without the lines it rewrites is refused.
func TestReleaseValues(t *testing.T) {
	b, err := os.ReadFile("../../charts/archivist/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rel := &Release{Version: "0.4.0", Registry: "registry.example.net/archivist", Images: map[string]Image{}}
	for i, svc := range Services {
		rel.Images[svc] = Image{Digest: "sha256:" + strings.Repeat(string(rune('a'+i)), 64)}
	}
	out, err := releaseValues(string(b), rel)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  registry: registry.example.net/archivist\n", "  tag: \"0.4.0\"\n", "    curator: sha256:" + strings.Repeat("b", 64) + "\n", "# The images: <registry>/<service>:<tag>"} {
		if !strings.Contains(out, want) {
			t.Errorf("the release's values lack %q", want)
		}
	}
	if _, err := releaseValues("image:\n  registry: x\n", rel); err == nil {
		t.Error("values without a tag and digests line were taken")
	}
}

// TestLayersAreReproducible: the same files make the same layer (no time
// or host in the tar or the gzip header), and the directories the service
// writes belong to its user.
func TestLayersAreReproducible(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := imageLayers(bin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := imageLayers(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 3 {
		t.Fatalf("%d layers, want 3", len(a))
	}
	for i := range a {
		if a[i].desc.Digest != b[i].desc.Digest || a[i].diffID != b[i].diffID {
			t.Errorf("layer %d: %s then %s", i, a[i].desc.Digest, b[i].desc.Digest)
		}
	}
}

// TestSBOMListsTheModules: the SBOM of a Go binary is SPDX 2.3 naming its
// main module, Go and every module linked into it, each with its purl.
func TestSBOMListsTheModules(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := SBOM(bin, "release-test", "0.4.0", "2026-11-28T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name string    `json:"name"`
			Refs []spdxRef `json:"externalRefs"`
		} `json:"packages"`
		Relationships []spdxRelationship `json:"relationships"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, p := range doc.Packages {
		if len(p.Refs) != 1 || !strings.HasPrefix(p.Refs[0].Locator, "pkg:golang/") {
			t.Errorf("%s: refs %v", p.Name, p.Refs)
		}
		names[p.Name] = p.Refs[0].Locator
	}
	if doc.SPDXVersion != "SPDX-2.3" || names["golang"] == "" || !strings.HasPrefix(names["oras.land/oras-go/v2"], "pkg:golang/oras.land/oras-go/v2@v2.") {
		t.Errorf("SBOM %s: %v", doc.SPDXVersion, names)
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%d relationships for %d packages: the document describes the main module, which depends on every other", len(doc.Relationships), len(doc.Packages))
	}
}
