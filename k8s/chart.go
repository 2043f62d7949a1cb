package k8s

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// KubeVersion is the Kubernetes version the chart is rendered for: the
// oldest its Chart.yaml accepts (kubeVersion), whose API the objects must
// fit.
const KubeVersion = "v1.30.0"

// Release is where and as what a chart is rendered.
type Release struct {
	// Name is the release's name (helm install NAME).
	Name string
	// Namespace is the release's namespace (helm install -n).
	Namespace string
}

// DefaultRelease is the install docs/DEPLOY.md makes.
var DefaultRelease = Release{Name: "archivist", Namespace: "archivist"}

// RenderChart renders the chart at dir as helm install would (the Helm
// SDK's loader, values schema and template engine, strict about missing
// values) with values over the chart's own, and returns each object's
// YAML, in the order of the templates' names.
func RenderChart(dir string, rel Release, values map[string]any) ([][]byte, error) {
	return RenderChartIn(dir, rel, values, nil)
}

// RenderChartIn renders as RenderChart does, in a cluster whose objects
// the templates' lookup calls read through cluster (nil: none, as helm
// template has). With a cluster the engine is not strict about missing
// values (the Helm SDK offers lookup only so).
func RenderChartIn(dir string, rel Release, values map[string]any, cluster engine.ClientProvider) ([][]byte, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	if ok := chartutil.IsCompatibleRange(c.Metadata.KubeVersion, KubeVersion); !ok {
		return nil, fmt.Errorf("chart %s: kubeVersion %q does not admit %s", dir, c.Metadata.KubeVersion, KubeVersion)
	}
	// As helm install and template do: a dependency whose condition is
	// false is left out, and the parent's values reach the subcharts.
	if err := chartutil.ProcessDependenciesWithMerge(c, values); err != nil {
		return nil, fmt.Errorf("chart %s: dependencies: %w", dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: KubeVersion, Major: "1", Minor: "30"}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return nil, fmt.Errorf("chart %s: values: %w", dir, err)
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClientProvider(c, vals, cluster)
	} else {
		files, err = engine.Engine{Strict: true}.Render(c, vals)
	}
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	var out [][]byte
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		docs := releaseutil.SplitManifests(files[name])
		for _, k := range releaseutil.BySplitManifestsOrder(slices.Collect(maps.Keys(docs))) {
			d := strings.TrimSpace(docs[k])
			if d == "" || onlyComments(d) {
				continue
			}
			// In one form whatever the template's style (block style, keys
			// sorted), as kubectl would print it.
			j, err := yaml.YAMLToJSON([]byte(d))
			if err != nil {
				return nil, fmt.Errorf("chart %s: %s: %w", dir, name, err)
			}
			y, err := yaml.JSONToYAML(j)
			if err != nil {
				return nil, err
			}
			out = append(out, y)
		}
	}
	return out, nil
}

func onlyComments(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// ChartValues are the values a release of the chart at dir is rendered
// with: values over the chart's own, coalesced as helm install does.
func ChartValues(dir string, values map[string]any) (map[string]any, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	v, err := chartutil.CoalesceValues(c, values)
	if err != nil {
		return nil, fmt.Errorf("chart %s: values: %w", dir, err)
	}
	return v.AsMap(), nil
}

// ReadValues reads a values file.
func ReadValues(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Chart renders the chart with values, strict-decodes every object into
// its upstream type and applies the deployment policies (Check).
func Chart(dir string, rel Release, values map[string]any) ([]Object, error) {
	docs, err := RenderChart(dir, rel, values)
	if err != nil {
		return nil, err
	}
	var objs []Object
	var errs []error
	for _, d := range docs {
		o, err := Decode(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Installed with -n: every object is in the release's namespace.
		if m, ok := o.Value.(metav1.Object); ok && m.GetNamespace() == "" {
			m.SetNamespace(rel.Namespace)
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, Check(objs)
}
