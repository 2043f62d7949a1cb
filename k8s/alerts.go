package k8s

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
)

var metricName = regexp.MustCompile(`archivist_[a-z_]+`)

// CheckMonitoring checks the Prometheus operator's objects: a PodMonitor
// scrapes every Archivist pod's admin port; every alert names only metrics
// Archivist exports (known), has a severity, a summary and a runbook
// section that exists in runbook (docs/RUNBOOK.md's text).
func CheckMonitoring(objs []Object, runbook string, known map[string]bool) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	scraped, alerts := false, 0
	anchors := map[string]bool{}
	for _, l := range strings.Split(runbook, "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			anchors[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h), " ", "-"))] = true
		}
	}
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *monitoringv1.PodMonitor:
			if v.Spec.Selector.MatchLabels["app.kubernetes.io/part-of"] == "archivist" {
				for _, ep := range v.Spec.PodMetricsEndpoints {
					if ep.Port != nil && *ep.Port == "admin" {
						scraped = true
					}
				}
			}
		case *monitoringv1.PrometheusRule:
			for _, g := range v.Spec.Groups {
				for _, r := range g.Rules {
					if r.Alert == "" {
						continue
					}
					alerts++
					expr := r.Expr.String()
					for _, loc := range metricName.FindAllStringIndex(expr, -1) {
						m := expr[loc[0]:loc[1]]
						if !known[m] && !known[histogramOf(m)] {
							fail("alert %s: metric %s is not one Archivist exports", r.Alert, m)
						}
						// Each on its release's namespace: two releases in
						// one Prometheus must not mix.
						sel, _, _ := strings.Cut(expr[loc[1]:], "}")
						if !strings.HasPrefix(sel, "{") || !strings.Contains(sel, "namespace=") {
							fail("alert %s: %s is not selected by namespace: another release's series would fire it", r.Alert, m)
						}
					}
					if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
						fail("alert %s: needs a severity label and a summary", r.Alert)
					}
					_, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "RUNBOOK.md#")
					if !ok || !anchors[anchor] {
						fail("alert %s: runbook_url %q names no section of docs/RUNBOOK.md", r.Alert, r.Annotations["runbook_url"])
					}
				}
			}
		}
	}
	if !scraped {
		fail("no PodMonitor scrapes the admin port of Archivist's pods")
	}
	if alerts == 0 {
		fail("no PrometheusRule alerts")
	}
	return errors.Join(errs...)
}

// DashboardConfigMap is the ConfigMap of Grafana's dashboard.
const DashboardConfigMap = "archivist-grafana-dashboard"

// CheckDashboard checks Grafana's dashboard, the JSON of the ConfigMap
// DashboardConfigMap carrying the sidecar's label (label, e.g.
// grafana_dashboard): it parses, has a uid and a namespace variable, and
// every query of every panel names only metrics Archivist exports (a
// histogram's _bucket, _sum and _count series are its own) and keeps to
// the chosen namespace.
func CheckDashboard(objs []Object, label string, known map[string]bool) error {
	var cm *corev1.ConfigMap
	for _, o := range objs {
		if v, ok := o.Value.(*corev1.ConfigMap); ok && v.Name == DashboardConfigMap {
			cm = v
		}
	}
	if cm == nil {
		return fmt.Errorf("no ConfigMap %s: Grafana has no dashboard", DashboardConfigMap)
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if cm.Labels[label] == "" {
		fail("ConfigMap %s lacks the label %s Grafana's sidecar loads dashboards by", cm.Name, label)
	}
	if len(cm.Data) != 1 {
		fail("ConfigMap %s: want one dashboard, have %d files", cm.Name, len(cm.Data))
	}
	for file, text := range cm.Data {
		var d struct {
			UID        string `json:"uid"`
			Title      string `json:"title"`
			Templating struct {
				List []struct {
					Name string `json:"name"`
				} `json:"list"`
			} `json:"templating"`
			Panels []dashboardPanel `json:"panels"`
		}
		if err := json.Unmarshal([]byte(text), &d); err != nil {
			fail("ConfigMap %s: %s is not JSON: %v", cm.Name, file, err)
			continue
		}
		if d.UID == "" || d.Title == "" {
			fail("dashboard %s: needs a uid and a title", file)
		}
		if !slices.ContainsFunc(d.Templating.List, func(v struct {
			Name string `json:"name"`
		}) bool {
			return v.Name == "namespace"
		}) {
			fail("dashboard %s: no namespace variable", file)
		}
		queries := 0
		var walk func([]dashboardPanel)
		walk = func(ps []dashboardPanel) {
			for _, p := range ps {
				walk(p.Panels)
				for _, t := range p.Targets {
					queries++
					for _, m := range metricName.FindAllString(t.Expr, -1) {
						if !known[m] && !known[histogramOf(m)] {
							fail("dashboard %s: panel %q queries %s, which Archivist does not export", file, p.Title, m)
						}
					}
					if !strings.Contains(t.Expr, `namespace="$namespace"`) {
						fail("dashboard %s: panel %q: query %q does not keep to the chosen namespace", file, p.Title, t.Expr)
					}
				}
			}
		}
		walk(d.Panels)
		if queries == 0 {
			fail("dashboard %s: no query", file)
		}
	}
	return errors.Join(errs...)
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// histogramOf is the histogram a series name is one of (its _bucket, _sum
// or _count), or "".
func histogramOf(series string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if h, ok := strings.CutSuffix(series, suffix); ok {
			return h
		}
	}
	return ""
}
