package k8s

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Ports of the NATS servers a NetworkPolicy of the NATS side governs.
const (
	natsClientPort  = 4222
	natsMonitorPort = 8222
)

// NATSSide is the NATS side of an Archivist install, rendered from
// charts/archivist-nats for a release: the objects the chart makes beside
// the official NATS chart, and the values it passes to that chart.
type NATSSide struct {
	// Release is where the NATS side is installed.
	Release Release
	// Objects are the chart's own objects, decoded strictly.
	Objects []Object
	// Serves is the namespace of the Archivist release it admits
	// (archivist.namespace).
	Serves string
	// KEDA and Monitoring are the namespaces let in to the monitoring port.
	KEDA, Monitoring string
	// NetworkPolicies tells whether the chart makes its NetworkPolicies.
	NetworkPolicies bool
	// NATS are the values passed to the official NATS chart (nats.*).
	NATS NATSValues
}

// NATSSideValues is the shape of charts/archivist-nats's values
// (values.schema.json refuses others before this is read).
type NATSSideValues struct {
	Global    map[string]any `json:"global,omitempty"`
	Archivist struct {
		Namespace string `json:"namespace"`
	} `json:"archivist"`
	Namespaces struct {
		KEDA       string `json:"keda"`
		Monitoring string `json:"monitoring"`
	} `json:"namespaces"`
	NetworkPolicies struct {
		Enabled bool `json:"enabled"`
	} `json:"networkPolicies"`
	Certificate map[string]string `json:"certificate"`
	NATS        NATSValues        `json:"nats"`
}

// RenderNATSSide renders the NATS side's chart at dir for rel with values
// over its own (as helm install would; the official NATS chart, a
// dependency fetched by helm dependency build, is not rendered), decodes
// its objects strictly and reads the values it passes to the NATS chart.
func RenderNATSSide(dir string, rel Release, values map[string]any) (*NATSSide, error) {
	docs, err := RenderChart(dir, rel, values)
	if err != nil {
		return nil, err
	}
	side := &NATSSide{Release: rel}
	for _, d := range docs {
		o, err := Decode(d)
		if err != nil {
			return nil, err
		}
		side.Objects = append(side.Objects, o)
	}
	merged, err := ChartValues(dir, values)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(merged)
	if err != nil {
		return nil, err
	}
	var v NATSSideValues
	if err := strictYAML(b, &v); err != nil {
		return nil, fmt.Errorf("chart %s: values: %w", dir, err)
	}
	side.Serves, side.KEDA, side.Monitoring = v.Archivist.Namespace, v.Namespaces.KEDA, v.Namespaces.Monitoring
	side.NetworkPolicies, side.NATS = v.NetworkPolicies.Enabled, v.NATS
	return side, nil
}

// Servers is the number of NATS servers the side runs: the cluster's
// replicas, or one where clustering is off.
func (s *NATSSide) Servers() int {
	if !s.NATS.Config.Cluster.Enabled {
		return 1
	}
	return s.NATS.Config.Cluster.Replicas
}

// CheckNATSSide checks the NATS side alone (its CA, certificate,
// NetworkPolicies and the values of the NATS chart: CheckNATSValues) and
// against the Archivist release it serves, rendered as archivist in
// release rel with the merged values app: the servers' certificate names
// the host the services dial, that host is in the side's namespace, the
// client port admits the release's namespace, the monitoring port admits
// KEDA's and Prometheus's namespaces as the release names them, the
// streams' replicas fit the servers, and the exporter has its PodMonitor
// where the release is monitored.
func CheckNATSSide(s *NATSSide, archivist []Object, rel Release, app map[string]any) error {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("NATS side (release %s in %s): "+format, append([]any{s.Release.Name, s.Release.Namespace}, a...)...))
	}
	config := map[string]string{}
	for _, o := range archivist {
		if cm, ok := o.Value.(*corev1.ConfigMap); ok && cm.Name == "archivist" {
			config = cm.Data
		}
	}
	if err := CheckNATSValues(s.NATS); err != nil {
		fail("%v", err)
	}
	if err := CheckNATSNamespace(s.Objects, NATSPairing{
		ClientURLs: config["NATS_URL"], Archivist: rel.Namespace,
		KEDA: s.KEDA, Monitoring: s.Monitoring, NetworkPolicies: s.NetworkPolicies,
	}); err != nil {
		fail("%v", err)
	}
	if s.Serves != rel.Namespace {
		fail("admits the Archivist release of namespace %q (archivist.namespace), not %q where it is installed: its pods cannot reach NATS, and nothing says why", s.Serves, rel.Namespace)
	}
	if ns := natsNamespace(config["NATS_URL"]); ns != s.Release.Namespace {
		fail("Archivist (namespace %s) dials NATS in namespace %q (namespaces.nats or nats.url), not %q", rel.Namespace, ns, s.Release.Namespace)
	}
	if n, err := strconv.Atoi(config["NATS_REPLICAS"]); err != nil || n < 1 || n > s.Servers() {
		fail("Archivist asks for %s replicas of each stream (nats.replicas); the side runs %d servers: the streams are never made", config["NATS_REPLICAS"], s.Servers())
	}
	if get[bool](app, "keda", "enabled") && get[string](app, "namespaces", "keda") != s.KEDA {
		fail("KEDA runs in %q for Archivist (namespaces.keda), the monitoring port admits %q: the scalers read no lag", get[string](app, "namespaces", "keda"), s.KEDA)
	}
	if get[bool](app, "monitoring", "enabled") {
		if get[string](app, "namespaces", "monitoring") != s.Monitoring {
			fail("Prometheus runs in %q for Archivist (namespaces.monitoring), the side admits %q", get[string](app, "namespaces", "monitoring"), s.Monitoring)
		}
		if e := s.NATS.PromExporter; !e.Enabled || !e.PodMonitor.Enabled || e.PodMonitor.Merge.Metadata.Labels["release"] == "" {
			fail("Archivist is monitored but the NATS exporter's PodMonitor is off or unlabelled (nats.promExporter): JetStream's storage and consumers go unwatched")
		}
	}
	return errors.Join(errs...)
}

// get reads a value at a path of nested maps, the zero value if absent.
func get[T any](m map[string]any, path ...string) T {
	var zero T
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return zero
		}
		cur = mm[k]
	}
	v, _ := cur.(T)
	return v
}

// NATSPairing is what the NATS side's objects must admit.
type NATSPairing struct {
	// ClientURLs is the services' NATS_URL: the certificate names its hosts.
	ClientURLs string
	// Archivist is the namespace whose pods reach the client port.
	Archivist string
	// KEDA and Monitoring are the only namespaces reaching the monitoring port.
	KEDA, Monitoring string
	// NetworkPolicies tells whether policies are expected at all.
	NetworkPolicies bool
}

// CheckNATSNamespace checks the NATS side's own objects: the servers'
// certificate from the namespace's own CA names every host of the
// services' NATS_URL, and (with policies on) ingress is denied by default,
// only Archivist's pods of its namespace and labelled clients reach the
// client port, and only KEDA and Prometheus the monitoring port.
func CheckNATSNamespace(objs []Object, p NATSPairing) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	monitorNamespaces := []string{p.KEDA, p.Monitoring}
	var policies []*networkingv1.NetworkPolicy
	var server *cmv1.Certificate
	var certs []*cmv1.Certificate
	var issuers []*cmv1.Issuer
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *networkingv1.NetworkPolicy:
			policies = append(policies, v)
		case *cmv1.Issuer:
			issuers = append(issuers, v)
		case *cmv1.Certificate:
			certs = append(certs, v)
			if v.Spec.SecretName == NATSServerSecret {
				server = v
			}
		}
	}
	if err := namespacedCA(NATSServerIssuer, NATSServerSecret, certs, issuers); err != nil {
		fail("%v", err)
	}
	if server != nil {
		if !slices.Contains(server.Spec.Usages, cmv1.UsageServerAuth) {
			fail("Certificate %s: usages lack server auth", server.Name)
		}
		for _, raw := range strings.Split(p.ClientURLs, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || u.Hostname() == "" {
				fail("NATS_URL %q: not a URL", raw)
				continue
			}
			if !coversName(server.Spec.DNSNames, u.Hostname()) {
				fail("Certificate %s does not name %s, the host the services dial: verification fails", server.Name, u.Hostname())
			}
		}
	}

	if !p.NetworkPolicies {
		return errors.Join(errs...)
	}
	denyAll, clientsIn, kedaIn := false, false, false
	for _, pol := range policies {
		if !slices.Contains(pol.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		if len(pol.Spec.PodSelector.MatchLabels) == 0 && len(pol.Spec.PodSelector.MatchExpressions) == 0 && len(pol.Spec.Ingress) == 0 {
			denyAll = true
		}
		for _, r := range pol.Spec.Ingress {
			if len(r.From) == 0 {
				fail("NetworkPolicy %s lets anyone in (an ingress rule without from)", pol.Name)
			}
			for _, f := range r.From {
				if f.PodSelector == nil && f.NamespaceSelector != nil && len(f.NamespaceSelector.MatchLabels) == 0 && len(f.NamespaceSelector.MatchExpressions) == 0 {
					fail("NetworkPolicy %s lets every pod of every namespace in", pol.Name)
				}
				if f.IPBlock != nil {
					fail("NetworkPolicy %s lets an IP block in", pol.Name)
				}
			}
			if opensPort(r, natsMonitorPort) {
				for _, f := range r.From {
					ns := ""
					if f.NamespaceSelector != nil {
						ns = f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
					}
					if !slices.Contains(monitorNamespaces, ns) {
						fail("NetworkPolicy %s opens the monitoring port %d to more than the %v namespaces", pol.Name, natsMonitorPort, monitorNamespaces)
						break
					}
					if ns == p.KEDA {
						kedaIn = true
					}
				}
			}
			if opensPort(r, natsClientPort) {
				for _, f := range r.From {
					if f.NamespaceSelector != nil && f.PodSelector != nil && f.PodSelector.MatchLabels["app.kubernetes.io/part-of"] == "archivist" &&
						f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == p.Archivist {
						clientsIn = true
					}
				}
			}
		}
	}
	if !denyAll {
		fail("no default-deny NetworkPolicy (podSelector {}, Ingress, no rules)")
	}
	if !clientsIn {
		fail("no NetworkPolicy lets the pods of Archivist's namespace %s reach the client port %d", p.Archivist, natsClientPort)
	}
	if !kedaIn {
		fail("no NetworkPolicy lets KEDA reach the monitoring port %d: the scalers read consumer lag there", natsMonitorPort)
	}
	return errors.Join(errs...)
}

// opensPort tells whether rule r lets traffic to port in (a rule without
// ports opens every port).
func opensPort(r networkingv1.NetworkPolicyIngressRule, port int) bool {
	if len(r.Ports) == 0 {
		return true
	}
	for _, p := range r.Ports {
		if p.Port == nil || *p.Port == intstr.FromInt32(int32(port)) {
			return true
		}
	}
	return false
}

// coversName tells whether one of a certificate's DNS names (one leading
// wildcard label allowed) matches host.
func coversName(names []string, host string) bool {
	for _, n := range names {
		if n == host {
			return true
		}
		if rest, ok := strings.CutPrefix(n, "*."); ok {
			if _, after, found := strings.Cut(host, "."); found && after == rest {
				return true
			}
		}
	}
	return false
}

// NATSServerIssuer is the namespaced Issuer of the NATS servers'
// certificate (charts/archivist-nats/templates/ca.yaml): a CA of the NATS
// side's namespace alone.
const NATSServerIssuer = "nats-ca"
