package k8s

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The checks of what kept an install on a real cluster from working while
// every pod was Ready: each names the failure it prevents.

var sha256Digest = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// checkImage: an image names its registry and a tag: "archivist/curator"
// resolves to Docker Hub, where no such image is published.
func checkImage(what, image string, fail func(string, ...any)) {
	image, digest, pinned := strings.Cut(image, "@")
	if pinned && !sha256Digest.MatchString(digest) {
		fail("%s: image digest %q is not a sha256 digest", what, digest)
	}
	name, tag, hasTag := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	first, _, hasSlash := strings.Cut(image, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		fail("%s: image %q names no registry (it would be pulled from docker.io): set image.registry", what, image)
	}
	if !hasTag || tag == "" || tag == "latest" || name == "" {
		fail("%s: image %q has no fixed tag", what, image)
	}
}

// checkPodRuntime: the pod drains before it is killed (a preStop pause so
// that the Service stops sending to it, then SHUTDOWN_TIMEOUT), the Go
// runtime knows its memory limit (GOMEMLIMIT below it: a heap that grows to
// the limit is collected instead of killed), the node keeps room for its
// emptyDirs (an ephemeral-storage request at least their sizes: else the
// kubelet evicts it when the node's disk fills), and a change of the
// ConfigMap rolls it (the services read their settings at start).
func checkPodRuntime(d *appsv1.Deployment, shutdown time.Duration, fail func(string, ...any)) {
	spec := d.Spec.Template.Spec
	c := container(d)
	var preStop time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || (c.Lifecycle.PreStop.Sleep == nil && c.Lifecycle.PreStop.Exec == nil) {
		fail("Deployment %s: no preStop pause: the pod stops taking work while its Service still sends it requests", d.Name)
	} else if s := c.Lifecycle.PreStop.Sleep; s != nil {
		preStop = time.Duration(s.Seconds) * time.Second
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second <= preStop+shutdown {
		fail("Deployment %s: termination grace %ds is not longer than the preStop pause %s and SHUTDOWN_TIMEOUT %s", d.Name, *g, preStop, shutdown)
	}
	limit := c.Resources.Limits.Memory()
	if v := envValue(d, "GOMEMLIMIT"); v == "" {
		fail("Deployment %s: no GOMEMLIMIT: the Go heap grows to the memory limit %s and the pod is killed instead of collecting", d.Name, limit)
	} else if n, err := goMemLimit(v); err != nil || limit.IsZero() || n >= limit.Value() {
		fail("Deployment %s: GOMEMLIMIT %q must be below the memory limit %s", d.Name, v, limit)
	}
	var scratch resource.Quantity
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil {
			scratch.Add(*v.EmptyDir.SizeLimit)
		}
	}
	if req, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; !scratch.IsZero() && (!ok || req.Cmp(scratch) < 0) {
		fail("Deployment %s: its emptyDirs may hold %s but it requests %s of ephemeral storage: the scheduler may place it on a node without the room, and the kubelet evicts it", d.Name, scratch.String(), req.String())
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		fail("Deployment %s: no checksum/config annotation on its pods: a change of the ConfigMap would not roll them", d.Name)
	}
}

var goMemLimitRE = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`)

// goMemLimit parses GOMEMLIMIT's syntax.
func goMemLimit(v string) (int64, error) {
	m := goMemLimitRE.FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("GOMEMLIMIT %q", v)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]int{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return n << shift, err
}

// checkSpread: a Deployment of more than one pod (or scaled by KEDA) spreads
// them over nodes: else a node's loss takes all of them.
func checkSpread(d *appsv1.Deployment, scaled bool, fail func(string, ...any)) {
	if !scaled && d.Spec.Replicas != nil && *d.Spec.Replicas <= 1 {
		return
	}
	for _, t := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if t.TopologyKey == "kubernetes.io/hostname" && t.LabelSelector != nil && t.LabelSelector.MatchLabels["app.kubernetes.io/name"] == d.Name {
			return
		}
	}
	fail("Deployment %s: no topology spread over kubernetes.io/hostname: its pods may all land on one node", d.Name)
}

// checkScaledReplicas: a Deployment KEDA scales sets no replicas: each
// apply or upgrade would reset it to that number under KEDA's feet.
func checkScaledReplicas(d *appsv1.Deployment, fail func(string, ...any)) {
	if d.Spec.Replicas != nil {
		fail("Deployment %s: KEDA scales it, yet it sets replicas %d: every upgrade resets the scale", d.Name, *d.Spec.Replicas)
	}
}

// checkPDBEviction: readiness includes PostgreSQL and NATS, so in their
// outage every pod is unready, and a PodDisruptionBudget that only evicts
// healthy pods blocks every node drain until it ends.
func checkPDBEviction(p *policyv1.PodDisruptionBudget, fail func(string, ...any)) {
	if p.Spec.UnhealthyPodEvictionPolicy == nil || *p.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		fail("PodDisruptionBudget %s: unhealthyPodEvictionPolicy must be AlwaysAllow: readiness includes PostgreSQL and NATS, and their outage would block every drain", p.Name)
	}
}

// checkWorkAreaStorage: a working area shared by several curators names its
// storage class: the big clouds' default classes are block storage, which
// cannot be ReadWriteMany, and the claim stays Pending; and the pod's
// fsGroup owns the volume, or the non-root curator cannot write to it.
func checkWorkAreaStorage(d *appsv1.Deployment, claims map[string]*corev1.PersistentVolumeClaim, fail func(string, ...any)) {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		c, ok := claims[v.PersistentVolumeClaim.ClaimName]
		if !ok {
			fail("Deployment %s: volume claim %s is not in the manifests", d.Name, v.PersistentVolumeClaim.ClaimName)
			continue
		}
		if slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany) && (c.Spec.StorageClassName == nil || *c.Spec.StorageClassName == "") {
			fail("PersistentVolumeClaim %s: ReadWriteMany without a storageClassName: the default class of EKS, GKE and AKS is block storage and the claim stays Pending (set ingest.storageClass to a file class)", c.Name)
		}
		sc := d.Spec.Template.Spec.SecurityContext
		if sc == nil || sc.FSGroup == nil || sc.RunAsGroup == nil || *sc.FSGroup != *sc.RunAsGroup {
			fail("Deployment %s: mounts volume claim %s without an fsGroup equal to its group: the non-root service cannot write to the volume", d.Name, c.Name)
		}
	}
}

// checkDatabaseURL: the connection string carries no credentials (PGUSER
// and PGPASSWORD come beside it): a password pasted into a URL breaks on
// "/", "@" or "%".
func checkDatabaseURL(what, u string, fail func(string, ...any)) {
	if p, err := url.Parse(u); err != nil || p.User != nil || strings.Contains(u, "$(PGPASSWORD)") {
		fail("%s: DATABASE_URL %q carries the credentials: give them as PGUSER and PGPASSWORD (a password with / or @ breaks the URL)", what, u)
	}
}

// checkScalerReachesService: KEDA's metrics-api trigger reads a URL that a
// Service of the manifests serves on that port.
func checkScalerReachesService(s *kedav1alpha1.ScaledObject, services []*corev1.Service, fail func(string, ...any)) {
	for _, tr := range s.Spec.Triggers {
		if tr.Type != "metrics-api" {
			continue
		}
		u, err := url.Parse(tr.Metadata["url"])
		if err != nil {
			fail("ScaledObject %s: url %q: %v", s.Name, tr.Metadata["url"], err)
			continue
		}
		svc, _, _ := strings.Cut(u.Hostname(), ".")
		port, _ := strconv.Atoi(u.Port())
		if !slices.ContainsFunc(services, func(x *corev1.Service) bool {
			return x.Name == svc && slices.ContainsFunc(x.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port })
		}) {
			fail("ScaledObject %s reads %s, but no Service %s serves port %d", s.Name, u, svc, port)
		}
	}
}

// checkMonitoringSelected: kube-prometheus-stack's Prometheus selects
// monitors and rules by the label release (its release's name): without it
// nothing is scraped and no alert is loaded, silently. And a scrape that
// fails or finds nothing alerts: a target down (up == 0) and an absent()
// per service.
func checkMonitoringSelected(monitors []*monitoringv1.PodMonitor, rules []*monitoringv1.PrometheusRule, fail func(string, ...any)) {
	for _, m := range monitors {
		if m.Labels["release"] == "" {
			fail("PodMonitor %s has no release label: kube-prometheus-stack's Prometheus selects monitors by it, and would scrape nothing", m.Name)
		}
	}
	down, absent := false, false
	for _, r := range rules {
		if r.Labels["release"] == "" {
			fail("PrometheusRule %s has no release label: kube-prometheus-stack's Prometheus selects rules by it, and would load no alert", r.Name)
		}
		for _, g := range r.Spec.Groups {
			for _, rule := range g.Rules {
				e := rule.Expr.String()
				down = down || (strings.Contains(e, "up{") && strings.Contains(e, "== 0"))
				absent = absent || strings.Contains(e, "absent(")
			}
		}
	}
	if len(monitors) > 0 && (!down || !absent) {
		fail("PrometheusRule: no target-down (up == 0) or absent() alert: a broken scrape would look like a quiet system")
	}
}
