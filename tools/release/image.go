package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// The user the services run as, who owns the directories they write.
const serviceUID = 65532

// blob is content with its descriptor.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	return blob{desc: content.NewDescriptorFromBytes(mediaType, data), data: data}
}

// buildAndPush builds svc's binary for each platform, pushes an image per
// platform, an index over them tagged with the version, and the SBOM.
func buildAndPush(ctx context.Context, o options, work, svc string, log *slog.Logger) (Image, error) {
	repo, err := remote.NewRepository(o.registry + "/" + svc)
	if err != nil {
		return Image{}, err
	}
	repo.PlainHTTP = o.plainHTTP
	if err := authenticate(repo); err != nil {
		return Image{}, err
	}
	img := Image{Platforms: map[string]string{}}
	var manifests []ocispec.Descriptor
	var sbomOf string
	for _, platform := range o.platforms {
		os_, arch, ok := strings.Cut(platform, "/")
		if !ok {
			return img, fmt.Errorf("platform %q: want OS/ARCH", platform)
		}
		bin := filepath.Join(work, os_+"-"+arch, svc)
		if err := buildBinary(ctx, o, svc, os_, arch, bin); err != nil {
			return img, err
		}
		if sbomOf == "" {
			sbomOf = bin
		}
		layers, err := imageLayers(bin)
		if err != nil {
			return img, err
		}
		m, err := pushImage(ctx, repo, o, svc, os_, arch, layers)
		if err != nil {
			return img, err
		}
		img.Platforms[platform] = m.Digest.String()
		manifests = append(manifests, m)
		log.Info("image pushed", "service", svc, "platform", platform, "digest", m.Digest)
	}
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: manifests,
		Annotations: labels(o, svc)}
	ib, err := json.Marshal(index)
	if err != nil {
		return img, err
	}
	idx := newBlob(ocispec.MediaTypeImageIndex, ib)
	if err := repo.PushReference(ctx, idx.desc, bytes.NewReader(idx.data), o.version); err != nil {
		return img, fmt.Errorf("push the index: %w", err)
	}
	img.Digest = idx.desc.Digest.String()
	img.Ref = o.registry + "/" + svc + "@" + img.Digest
	sbom, err := pushSBOM(ctx, repo, o, svc, sbomOf, idx.desc)
	if err != nil {
		return img, fmt.Errorf("the SBOM: %w", err)
	}
	img.SBOM = sbom.String()
	return img, nil
}

// authenticate has repo present the credentials docker keeps for its
// registry (docker login; none for a local registry).
func authenticate(repo *remote.Repository) error {
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return fmt.Errorf("docker's credentials: %w", err)
	}
	repo.Client = &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(store)}
	return nil
}

// buildBinary compiles svc for os/arch with scripts/build-service. The
// indexer and the CLI link libdeflate where a C toolchain for the target
// is at hand (the host's); for another architecture they inflate in pure
// Go (a C cross-compiler and its libdeflate.a would link it: CC).
func buildBinary(ctx context.Context, o options, svc, os_, arch, out string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(o.root, "scripts", "build-service"), svc, out, o.version)
	cmd.Env = append(os.Environ(), "GOOS="+os_, "GOARCH="+arch, "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	if arch != runtime.GOARCH && os.Getenv("CC") == "" {
		cmd.Env = append(cmd.Env, "ARCHIVIST_LIBDEFLATE=0")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s/%s: %w\n%s", svc, os_, arch, err, b)
	}
	return nil
}

// layer is a gzipped tar layer and the digest of its tar (the diff ID).
type layer struct {
	blob
	diffID digest.Digest
}

// entry is a file or directory of a layer.
type entry struct {
	name string
	mode int64
	uid  int
	data []byte // nil: a directory
}

// imageLayers are the image's layers: the base (users, CA certificates,
// /tmp), the directories the service writes (owned by it) and the binary.
func imageLayers(bin string) ([]layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", serviceUID, serviceUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", serviceUID)
	base := []entry{{name: "etc/", mode: 0o755}, {name: "etc/passwd", mode: 0o644, data: []byte(passwd)}, {name: "etc/group", mode: 0o644, data: []byte(group)}, {name: "tmp/", mode: 0o1777}}
	if certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		base = append(base, entry{name: "etc/ssl/", mode: 0o755}, entry{name: "etc/ssl/certs/", mode: 0o755}, entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs})
	} else {
		return nil, fmt.Errorf("the CA certificates (ca-certificates): %w", err)
	}
	var own []entry
	for _, d := range []string{"var/", "var/lib/", "var/lib/archivist/", "var/cache/", "etc/archivist/"} {
		own = append(own, entry{name: d, mode: 0o755})
	}
	for _, d := range []string{"blobs/", "var/lib/archivist/ingest/", "etc/archivist/keys/", "etc/archivist/operator/", "var/cache/archivist/"} {
		own = append(own, entry{name: d, mode: 0o755, uid: serviceUID})
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var out []layer
	for _, entries := range [][]entry{base, own, {{name: "service", mode: 0o755, data: b}}} {
		l, err := makeLayer(entries)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// makeLayer writes entries as a tar with no time or host in it (the same
// input, the same digest), gzipped without a name or time.
func makeLayer(entries []entry) (layer, error) {
	var t bytes.Buffer
	tw := tar.NewWriter(&t)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return layer{}, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return layer{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return layer{}, err
	}
	sum := sha256.Sum256(t.Bytes())
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if err != nil {
		return layer{}, err
	}
	if _, err := zw.Write(t.Bytes()); err != nil {
		return layer{}, err
	}
	if err := zw.Close(); err != nil {
		return layer{}, err
	}
	return layer{blob: newBlob(ocispec.MediaTypeImageLayerGzip, z.Bytes()), diffID: digest.Digest("sha256:" + hex.EncodeToString(sum[:]))}, nil
}

// labels are the OCI annotations of the images (and their config's labels).
func labels(o options, svc string) map[string]string {
	return map[string]string{
		ocispec.AnnotationTitle:         "archivist-" + svc,
		ocispec.AnnotationDescription:   "Archivist's " + svc + ": an open processing back end for digital archives",
		ocispec.AnnotationVersion:       o.version,
		ocispec.AnnotationRevision:      o.revision,
		ocispec.AnnotationCreated:       o.created.Format("2006-01-02T15:04:05Z"),
		ocispec.AnnotationSource:        "https://github.com/archivist/archivist",
		ocispec.AnnotationURL:           "https://github.com/archivist/archivist",
		ocispec.AnnotationLicenses:      "Apache-2.0",
		ocispec.AnnotationVendor:        "Archivist",
		ocispec.AnnotationBaseImageName: "scratch",
	}
}

// pushImage pushes the layers, the config and the manifest of one
// platform's image, and returns the manifest's descriptor with its
// platform.
func pushImage(ctx context.Context, repo *remote.Repository, o options, svc, os_, arch string, layers []layer) (ocispec.Descriptor, error) {
	created := o.created
	cfg := ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{OS: os_, Architecture: arch},
		Config: ocispec.ImageConfig{
			User:         fmt.Sprintf("%d:%d", serviceUID, serviceUID),
			Entrypoint:   []string{"/service"},
			ExposedPorts: map[string]struct{}{"9090/tcp": {}},
			Labels:       labels(o, svc),
		},
		RootFS: ocispec.RootFS{Type: "layers"},
	}
	var descs []ocispec.Descriptor
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
		descs = append(descs, l.desc)
		if err := pushBlob(ctx, repo, l.blob); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	config := newBlob(ocispec.MediaTypeImageConfig, cb)
	if err := pushBlob(ctx, repo, config); err != nil {
		return ocispec.Descriptor{}, err
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config.desc, Layers: descs, Annotations: labels(o, svc)}
	mb, err := json.Marshal(m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest := newBlob(ocispec.MediaTypeImageManifest, mb)
	if err := pushBlob(ctx, repo, manifest); err != nil {
		return ocispec.Descriptor{}, err
	}
	d := manifest.desc
	d.Platform = &ocispec.Platform{OS: os_, Architecture: arch}
	return d, nil
}

// pushBlob pushes a blob or manifest unless the registry has it.
func pushBlob(ctx context.Context, repo *remote.Repository, b blob) error {
	if ok, err := repo.Exists(ctx, b.desc); err == nil && ok {
		return nil
	}
	if err := repo.Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil && !isExists(err) {
		return fmt.Errorf("push %s %s: %w", b.desc.MediaType, b.desc.Digest, err)
	}
	return nil
}

// isExists tells a push the registry already had.
func isExists(err error) bool { return errors.Is(err, errdef.ErrAlreadyExists) }
