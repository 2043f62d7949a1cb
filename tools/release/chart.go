package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
)

// releaseValues rewrites the chart's values.yaml text for the release,
// comments kept: image.registry, the tag and the digests by image.
func releaseValues(text string, rel *Release) (string, error) {
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`(?m)^  registry: .*\n`), "  registry: " + rel.Registry + "\n"},
		{regexp.MustCompile(`(?m)^  tag: .*\n`), fmt.Sprintf("  tag: %q\n", rel.Version)},
		{regexp.MustCompile(`(?m)^  digests: \{\}\n`), digestsYAML(rel)},
	} {
		if len(r.re.FindAllStringIndex(text, -1)) != 1 {
			return "", fmt.Errorf("values.yaml: want one line matching %s", r.re)
		}
		text = r.re.ReplaceAllLiteralString(text, r.with)
	}
	return text, nil
}

// pushChart packages charts/archivist for the release (its version and
// appVersion, the images' registry, tag and digests in values.yaml) and
// pushes it as an OCI artifact to REGISTRY/charts/archivist:VERSION.
func pushChart(o options, rel *Release, work string) (Chart, error) {
	c, err := loader.Load(filepath.Join(o.root, "charts", "archivist"))
	if err != nil {
		return Chart{}, err
	}
	c.Metadata.Version, c.Metadata.AppVersion = o.version, o.version
	for _, f := range c.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		text, err := releaseValues(string(f.Data), rel)
		if err != nil {
			return Chart{}, err
		}
		f.Data = []byte(text)
		if c.Values, err = chartutil.ReadValues(f.Data); err != nil {
			return Chart{}, err
		}
	}
	if err := c.Validate(); err != nil {
		return Chart{}, err
	}
	path, err := chartutil.Save(c, work)
	if err != nil {
		return Chart{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Chart{}, err
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(os.Stderr)}
	if o.plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return Chart{}, err
	}
	ref := fmt.Sprintf("%s/charts/%s:%s", o.registry, c.Name(), o.version)
	res, err := client.Push(data, ref)
	if err != nil {
		return Chart{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return Chart{Ref: fmt.Sprintf("%s/charts/%s", o.registry, c.Name()), Digest: res.Manifest.Digest}, nil
}
