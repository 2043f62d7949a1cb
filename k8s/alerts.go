package k8s

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
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
					for _, m := range metricName.FindAllString(r.Expr.String(), -1) {
						if !known[m] {
							fail("alert %s: metric %s is not one Archivist exports", r.Alert, m)
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
