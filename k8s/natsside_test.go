package k8s_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/archivist/archivist/k8s"
)

// natsChartDir is the NATS side's chart.
const natsChartDir = "../charts/archivist-nats"

// natsPair renders the NATS side for Archivist's value set name (its own
// value set of the same name in ci/, none for the defaults) over the
// overrides side, and Archivist with values over app in the namespace the
// side admits: the NATS side's release "nats" in Archivist's
// namespaces.nats. where, if set, installs them elsewhere: [Archivist's
// namespace, the NATS side's].
func natsPair(t *testing.T, name string, app, side map[string]any, where ...string) (*k8s.NATSSide, []k8s.Object, k8s.Release, map[string]any, error) {
	t.Helper()
	sideValues := map[string]any{}
	if name != "defaults" {
		f := filepath.Join(natsChartDir, "ci", name)
		v, err := k8s.ReadValues(f)
		if err != nil {
			t.Fatalf("Archivist's value set %s has no NATS side to pair with: %v", name, err)
		}
		sideValues = v
	}
	sideValues = merge(sideValues, side)
	merged, err := k8s.ChartValues(chartDir, app)
	if err != nil {
		t.Fatal(err)
	}
	natsNS, _ := merged["namespaces"].(map[string]any)["nats"].(string)
	if len(where) == 2 {
		natsNS = where[1]
	}
	s, err := k8s.RenderNATSSide(natsChartDir, k8s.Release{Name: "nats", Namespace: natsNS}, sideValues)
	if err != nil {
		t.Fatal(err)
	}
	rel := k8s.Release{Name: "archivist", Namespace: s.Serves}
	if len(where) == 2 {
		rel.Namespace = where[0]
	}
	objs, err := k8s.Chart(chartDir, rel, app)
	if err != nil {
		t.Fatal(err)
	}
	return s, objs, rel, merged, k8s.CheckNATSSide(s, objs, rel, merged)
}

// merge lays over onto a copy of base, maps recursively.
func merge(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// values builds nested values from a dotted path and a value.
func values(path string, v any) map[string]any {
	keys := strings.Split(path, ".")
	out := map[string]any{keys[len(keys)-1]: v}
	for i := len(keys) - 2; i >= 0; i-- {
		out = map[string]any{keys[i]: out}
	}
	return out
}

// TestNATSSide: every value set of Archivist's chart meets the NATS side
// it needs (its value set of the same name in charts/archivist-nats/ci):
// the side's certificate names the host Archivist dials, its policies
// admit Archivist's namespace, KEDA and Prometheus, and it runs enough
// servers for the streams' replicas. The AKS pair installs Archivist into
// archive-prod with NATS in messaging.
func TestNATSSide(t *testing.T) {
	sides, err := filepath.Glob(filepath.Join(natsChartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sets := valueSets(t)
	for _, f := range sides {
		if _, ok := sets[filepath.Base(f)]; !ok {
			t.Errorf("%s pairs with no value set of %s/ci", f, chartDir)
		}
	}
	for name, app := range sets {
		t.Run(name, func(t *testing.T) {
			side, _, rel, _, err := natsPair(t, name, app, nil)
			if err != nil {
				t.Fatal(err)
			}
			if name != "aks-values.yaml" {
				return
			}
			if rel.Namespace != "archive-prod" || side.Release.Namespace != "messaging" {
				t.Fatalf("the AKS pair installs Archivist into %s and NATS into %s, want archive-prod and messaging", rel.Namespace, side.Release.Namespace)
			}
			for _, o := range side.Objects {
				switch v := o.Value.(type) {
				case *cmv1.Certificate:
					if v.Name == "nats-server" && !slices.Contains(v.Spec.DNSNames, "nats.messaging.svc.cluster.local") {
						t.Errorf("the servers' certificate names %v, not nats.messaging.svc.cluster.local", v.Spec.DNSNames)
					}
				case *networkingv1.NetworkPolicy:
					if v.Name == "nats-clients" && v.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "archive-prod" {
						t.Errorf("nats-clients admits %v, not archive-prod", v.Spec.Ingress[0].From[0].NamespaceSelector)
					}
				}
			}
		})
	}
}

// TestNATSSideRefusesAMismatch: a pair that would not meet on a cluster,
// or a NATS side unsafe alone, is refused with the reason.
func TestNATSSideRefusesAMismatch(t *testing.T) {
	aks, err := k8s.ReadValues(filepath.Join(chartDir, "ci", "aks-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	small, err := k8s.ReadValues(filepath.Join(chartDir, "ci", "small-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, set string
		app, side map[string]any
		want      string
		where     []string
	}{
		{"the side admits another namespace", "aks-values.yaml", aks, values("archivist.namespace", "archivist"), `admits the Archivist release of namespace "archivist"`, []string{"archive-prod", "messaging"}},
		{"Archivist dials NATS elsewhere", "aks-values.yaml", merge(aks, values("namespaces.nats", "nats")), nil, `dials NATS in namespace "nats"`, []string{"archive-prod", "messaging"}},
		{"more stream replicas than servers", "small-values.yaml", merge(small, values("nats.replicas", 3)), nil, "replicas of each stream", nil},
		{"KEDA elsewhere", "defaults", nil, values("namespaces.keda", "autoscaling"), "KEDA runs in", nil},
		{"Prometheus elsewhere", "defaults", nil, values("namespaces.monitoring", "observability"), "Prometheus runs in", nil},
		{"monitored without the exporter's PodMonitor", "defaults", nil, values("nats.promExporter.podMonitor.enabled", false), "PodMonitor is off", nil},
		{"an even cluster", "defaults", nil, values("nats.config.cluster.replicas", 2), "odd number", nil},
		{"clients without TLS", "defaults", nil, values("nats.config.nats.tls.enabled", false), "config.nats.tls", nil},
		{"clients without certificates", "defaults", nil, values("nats.config.nats.tls.merge.verify", false), "verify must be true", nil},
		{"routes without TLS", "defaults", nil, values("nats.config.cluster.tls.enabled", false), "config.cluster.tls", nil},
		{"routes trusting another CA", "defaults", nil, values("nats.config.cluster.tls.merge.ca_file", "/etc/elsewhere"), "routes check each other", nil},
		{"no clients' CAs", "defaults", nil, values("nats.tlsCA.enabled", false), "tlsCA", nil},
		{"the servers as root", "defaults", nil, values("nats.podTemplate.merge.spec.securityContext.runAsNonRoot", false), "runAsNonRoot", nil},
		{"the server may escalate", "defaults", nil, values("nats.container.merge.securityContext.allowPrivilegeEscalation", true), "privilege escalation", nil},
		{"the reloader unhardened", "defaults", nil, values("nats.reloader.merge.securityContext.readOnlyRootFilesystem", false), "reloader.merge.securityContext", nil},
		{"no exporter", "defaults", nil, values("nats.promExporter.enabled", false), "promExporter must be enabled", nil},
		{"no fsync", "defaults", nil, values("nats.config.jetstream.merge.sync_interval", "2m"), "sync_interval", nil},
		{"policies off where Archivist has them", "defaults", nil, values("networkPolicies.enabled", false), "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, _, err := natsPair(t, c.set, c.app, c.side, c.where...)
			if c.want == "" {
				// A side without policies is allowed (a cluster without a
				// policy engine): nothing to refuse.
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// TestNATSSideObjects: the side's own objects are refused with each fault:
// the monitoring port open beyond KEDA and Prometheus, no default deny,
// the client port open to every pod or to another namespace, a server
// certificate without the host Archivist dials, or from a ClusterIssuer.
func TestNATSSideObjects(t *testing.T) {
	rel := k8s.Release{Name: "nats", Namespace: "nats"}
	docs, err := k8s.RenderChart(natsChartDir, rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	pairing := k8s.NATSPairing{ClientURLs: "tls://nats.nats.svc.cluster.local:4222", Archivist: "archivist", KEDA: "keda", Monitoring: "monitoring", NetworkPolicies: true}
	check := func(docs [][]byte, p k8s.NATSPairing) error {
		objs, err := decodeAllUnchecked(docs)
		if err != nil {
			return err
		}
		return k8s.CheckNATSNamespace(objs, p)
	}
	if err := check(docs, pairing); err != nil {
		t.Fatal(err)
	}
	other := pairing
	other.ClientURLs = "tls://nats.messaging.svc.cluster.local:4222"
	if err := check(docs, other); err == nil || !strings.Contains(err.Error(), "does not name nats.messaging.svc.cluster.local") {
		t.Errorf("a certificate of namespace nats for NATS dialled in messaging: %v", err)
	}
	for _, c := range []struct {
		name, marker, old, new, want string
	}{
		{"monitoring open to every namespace's Prometheus-labelled pods", "name: nats-monitoring", "  - from:\n    - namespaceSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: keda\n",
			"  - from:\n    - namespaceSelector: {}\n      podSelector: {matchLabels: {app: prometheus}}\n    - namespaceSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: keda\n", "opens the monitoring port"},
		{"monitoring from the archivist namespace", "name: nats-monitoring", "kubernetes.io/metadata.name: keda", "kubernetes.io/metadata.name: archivist", "opens the monitoring port"},
		{"a client rule without ports opens monitoring", "name: nats-clients", "    ports:\n    - port: 4222\n", "", "opens the monitoring port"},
		{"no default deny", "name: default-deny-ingress", "podSelector: {}", "podSelector: {matchLabels: {x: y}}", "default-deny"},
		{"client port open to every pod", "name: nats-clients", "    - namespaceSelector: {}\n      podSelector:\n        matchLabels:\n          archivist.io/nats-client: \"true\"\n", "    - namespaceSelector: {}\n", "every pod of every namespace"},
		{"client port for another namespace", "name: nats-clients", "kubernetes.io/metadata.name: archivist", "kubernetes.io/metadata.name: archivist-dev", "namespace archivist reach the client port"},
		{"certificate without the service's name", "name: nats-server", "  - nats.nats.svc.cluster.local\n", "", "does not name nats.nats.svc.cluster.local"},
		{"unknown field in the certificate", "name: nats-server", "dnsNames:", "dnsName:", "unknown field"},
		{"the server certificate from a ClusterIssuer", "name: nats-server", "kind: Issuer", "kind: ClusterIssuer", "want the namespaced Issuer nats-ca"},
		{"the servers' Issuer not a CA", "kind: Issuer\nmetadata:\n  labels:\n    app.kubernetes.io/instance: nats\n    app.kubernetes.io/managed-by: Helm\n    app.kubernetes.io/name: archivist-nats\n    app.kubernetes.io/part-of: archivist\n    helm.sh/chart: archivist-nats-", "secretName: nats-ca", "secretName: something-else", "does not sign with a CA Certificate's Secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := check(mutate(t, docs, c.marker, c.old, c.new), pairing); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// TestNATSSideUsersFile: the chart's ConfigMap nats-auth carries the
// users file as generated (files/auth.conf).
func TestNATSSideUsersFile(t *testing.T) {
	side, err := k8s.RenderNATSSide(natsChartDir, k8s.Release{Name: "nats", Namespace: "messaging"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(natsChartDir, "files", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range side.Objects {
		if cm, ok := o.Value.(*corev1.ConfigMap); ok && cm.Name == "nats-auth" {
			if got := cm.Data["auth.conf"]; strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
				t.Errorf("nats-auth's auth.conf differs from files/auth.conf")
			}
			return
		}
	}
	t.Error("no ConfigMap nats-auth")
}

// TestNATSSideRunsTheTestedServer: the NATS side runs the server version
// Archivist's tests embed (nats-server/v2 in devkit/go.mod), pinned.
func TestNATSSideRunsTheTestedServer(t *testing.T) {
	mod, err := os.ReadFile("../devkit/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v([0-9.]+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("devkit/go.mod requires no nats-server/v2")
	}
	side, err := k8s.RenderNATSSide(natsChartDir, k8s.Release{Name: "nats", Namespace: "nats"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tag := side.NATS.Container.Image.Tag; !strings.HasPrefix(tag, string(m[1])+"-") && tag != string(m[1]) {
		t.Errorf("the NATS side runs %s, the tests nats-server %s", tag, m[1])
	}
}
