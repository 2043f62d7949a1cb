package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
)

// SPDXMediaType is an SPDX document in JSON, the SBOM's artifact type.
const SPDXMediaType = "application/spdx+json"

// spdxPackage is an SPDX 2.3 package.
type spdxPackage struct {
	Name             string    `json:"name"`
	SPDXID           string    `json:"SPDXID"`
	VersionInfo      string    `json:"versionInfo,omitempty"`
	DownloadLocation string    `json:"downloadLocation"`
	FilesAnalyzed    bool      `json:"filesAnalyzed"`
	ExternalRefs     []spdxRef `json:"externalRefs,omitempty"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// SBOM is the SPDX 2.3 document of a Go binary: its main module, the Go
// toolchain and every module linked into it, as the binary's build
// information records them (what `go version -m` prints).
func SBOM(bin, name, version, created string) ([]byte, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("build information of %s: %w", bin, err)
	}
	purl := func(path, v string) []spdxRef {
		return []spdxRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + v}}
	}
	id := func(s string) string {
		return "SPDXRef-Package-" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				return r
			}
			return '-'
		}, s)
	}
	main := spdxPackage{Name: info.Main.Path, SPDXID: id(info.Main.Path), VersionInfo: version, DownloadLocation: "https://github.com/archivist/archivist", ExternalRefs: purl(info.Main.Path, version)}
	pkgs := []spdxPackage{main, {Name: "golang", SPDXID: id("golang"), VersionInfo: strings.TrimPrefix(info.GoVersion, "go"), DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: []spdxRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/stdlib@" + strings.TrimPrefix(info.GoVersion, "go")}}}}
	rels := []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: main.SPDXID}, {Element: main.SPDXID, Type: "DEPENDS_ON", Related: id("golang")}}
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		v := m.Version
		if v == "" || v == "(devel)" {
			v = version // a module of this repository, replaced by its directory
		}
		p := spdxPackage{Name: d.Path, SPDXID: id(d.Path), VersionInfo: v, DownloadLocation: "NOASSERTION", ExternalRefs: purl(d.Path, v)}
		pkgs = append(pkgs, p)
		rels = append(rels, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID})
	}
	doc := map[string]any{
		"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
		"name":              name,
		"documentNamespace": "https://github.com/archivist/archivist/spdx/" + name + "-" + version,
		"creationInfo":      map[string]any{"created": created, "creators": []string{"Tool: archivist-release"}},
		"packages":          pkgs,
		"relationships":     rels,
	}
	return json.MarshalIndent(doc, "", "  ")
}

// pushSBOM pushes the SBOM of bin as an artifact whose subject is the
// index: registries with the referrers API list it there; others get the
// referrers tag (sha256-<index digest>), which clients also read.
func pushSBOM(ctx context.Context, repo *remote.Repository, o options, svc, bin string, subject ocispec.Descriptor) (digest.Digest, error) {
	doc, err := SBOM(bin, "archivist-"+svc, o.version, o.created.Format("2006-01-02T15:04:05Z"))
	if err != nil {
		return "", err
	}
	layer := newBlob(SPDXMediaType, doc)
	layer.desc.Annotations = map[string]string{ocispec.AnnotationTitle: "archivist-" + svc + ".spdx.json"}
	empty := blob{desc: ocispec.DescriptorEmptyJSON, data: ocispec.DescriptorEmptyJSON.Data}
	for _, b := range []blob{layer, empty} {
		if err := pushBlob(ctx, repo, b); err != nil {
			return "", err
		}
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, ArtifactType: SPDXMediaType,
		Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer.desc}, Subject: &subject,
		Annotations: map[string]string{ocispec.AnnotationCreated: o.created.Format("2006-01-02T15:04:05Z")}}
	mb, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	manifest := newBlob(ocispec.MediaTypeImageManifest, mb)
	manifest.desc.ArtifactType = SPDXMediaType
	if err := repo.Push(ctx, manifest.desc, bytes.NewReader(manifest.data)); err != nil && !isExists(err) {
		return "", fmt.Errorf("push the SBOM: %w", err)
	}
	return manifest.desc.Digest, nil
}
