package k8s

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ports of the NATS servers a NetworkPolicy in the nats namespace governs.
const (
	natsClientPort  = 4222
	natsMonitorPort = 8222
)

// monitorNamespaces are the only namespaces that may reach NATS's
// monitoring port: KEDA reads consumer lag there, Prometheus scrapes it.
var monitorNamespaces = []string{"keda", "monitoring"}

// NATSNamespace builds, decodes and checks the nats namespace's objects
// (k8s/nats): the servers' certificate names every host of clientURLs (the
// services' NATS_URL), and the NetworkPolicies deny ingress by default, let
// only Archivist's pods and labelled clients reach the client port, and
// only KEDA and Prometheus the monitoring port.
func NATSNamespace(dir, clientURLs string) ([]Object, error) {
	docs, err := Build(dir)
	if err != nil {
		return nil, err
	}
	var objs []Object
	for _, d := range docs {
		o, err := Decode(d)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, CheckNATSNamespace(objs, clientURLs)
}

// CheckNATSNamespace applies NATSNamespace's checks to decoded objects.
func CheckNATSNamespace(objs []Object, clientURLs string) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("nats namespace: "+format, a...)) }
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
		for _, raw := range strings.Split(clientURLs, ",") {
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

	denyAll, clientsIn, kedaIn := false, false, false
	for _, p := range policies {
		if !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		if len(p.Spec.PodSelector.MatchLabels) == 0 && len(p.Spec.PodSelector.MatchExpressions) == 0 && len(p.Spec.Ingress) == 0 {
			denyAll = true
		}
		for _, r := range p.Spec.Ingress {
			if len(r.From) == 0 {
				fail("NetworkPolicy %s lets anyone in (an ingress rule without from)", p.Name)
			}
			for _, f := range r.From {
				if f.PodSelector == nil && f.NamespaceSelector != nil && len(f.NamespaceSelector.MatchLabels) == 0 && len(f.NamespaceSelector.MatchExpressions) == 0 {
					fail("NetworkPolicy %s lets every pod of every namespace in", p.Name)
				}
				if f.IPBlock != nil {
					fail("NetworkPolicy %s lets an IP block in", p.Name)
				}
			}
			if opensPort(r, natsMonitorPort) {
				for _, f := range r.From {
					ns := ""
					if f.NamespaceSelector != nil {
						ns = f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
					}
					if !slices.Contains(monitorNamespaces, ns) {
						fail("NetworkPolicy %s opens the monitoring port %d to more than the %v namespaces", p.Name, natsMonitorPort, monitorNamespaces)
						break
					}
					if ns == "keda" {
						kedaIn = true
					}
				}
			}
			if opensPort(r, natsClientPort) {
				for _, f := range r.From {
					if f.NamespaceSelector != nil && f.PodSelector != nil && f.PodSelector.MatchLabels["app.kubernetes.io/part-of"] == "archivist" {
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
		fail("no NetworkPolicy lets Archivist's pods reach the client port %d", natsClientPort)
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
// certificate (k8s/nats/ca.yaml): a CA of the nats namespace alone.
const NATSServerIssuer = "nats-ca"
