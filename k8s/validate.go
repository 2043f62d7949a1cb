// Package k8s validates Archivist's deployment files offline: it renders
// the Helm chart (charts/archivist) with the Helm SDK, strict-decodes each
// object into its upstream project's own Go API type (k8s.io/api;
// CloudNativePG's api module, KEDA's, cert-manager's and the Prometheus
// operator's apis, at pinned versions), failing on unknown fields, and
// checks the policies operators rely on. It also checks the NATS Helm
// values, the nats namespace (a kustomization), compose.yaml, the
// Dockerfile and the repository.
package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cnpgv1 "github.com/cloudnative-pg/api/pkg/api/v1"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/archivist/archivist/events"
)

// Object is one decoded manifest object.
type Object struct {
	Kind string
	Name string
	// Value is the typed object: *appsv1.Deployment, *cnpgv1.Cluster, ... (the upstream projects' own API types)
	Value any
}

// Build runs kustomize on dir and returns each object's YAML.
func Build(dir string) ([][]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out [][]byte
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// Decode strict-decodes one object by its kind.
func Decode(doc []byte) (Object, error) {
	var tm typeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return Object{}, err
	}
	var v any
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		v = &appsv1.Deployment{}
	case "batch/v1/Job":
		v = &batchv1.Job{}
	case "v1/Service":
		v = &corev1.Service{}
	case "v1/PersistentVolumeClaim":
		v = &corev1.PersistentVolumeClaim{}
	case "v1/ServiceAccount":
		v = &corev1.ServiceAccount{}
	case "v1/ConfigMap":
		v = &corev1.ConfigMap{}
	case "v1/Secret":
		v = &corev1.Secret{}
	case "v1/Pod":
		v = &corev1.Pod{}
	case "policy/v1/PodDisruptionBudget":
		v = &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		v = &autoscalingv2.HorizontalPodAutoscaler{}
	case "postgresql.cnpg.io/v1/ScheduledBackup":
		v = &cnpgv1.ScheduledBackup{}
	case "postgresql.cnpg.io/v1/Cluster":
		v = &cnpgv1.Cluster{}
	case "keda.sh/v1alpha1/ScaledObject":
		v = &kedav1alpha1.ScaledObject{}
	case "networking.k8s.io/v1/NetworkPolicy":
		v = &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1/PodMonitor":
		v = &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		v = &monitoringv1.PrometheusRule{}
	case "cert-manager.io/v1/Certificate":
		v = &cmv1.Certificate{}
	case "cert-manager.io/v1/ClusterIssuer":
		v = &cmv1.ClusterIssuer{}
	case "cert-manager.io/v1/Issuer":
		v = &cmv1.Issuer{}
	default:
		return Object{}, fmt.Errorf("%s %s: kind %s/%s is not one Archivist deploys", tm.Kind, tm.Metadata.Name, tm.APIVersion, tm.Kind)
	}
	if err := strictYAML(doc, v); err != nil {
		return Object{}, fmt.Errorf("%s %s: %w", tm.Kind, tm.Metadata.Name, err)
	}
	return Object{Kind: tm.Kind, Name: tm.Metadata.Name, Value: v}, nil
}

// strictYAML decodes YAML into v, failing on fields v does not have.
func strictYAML(doc []byte, v any) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Check applies the deployment policies to a set of objects.
func Check(objs []Object) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	deployments := map[string]*appsv1.Deployment{}
	pdbs := map[string]bool{}
	var pdbList []*policyv1.PodDisruptionBudget
	var scaledObjects []*kedav1alpha1.ScaledObject
	var monitors []*monitoringv1.PodMonitor
	var rules []*monitoringv1.PrometheusRule
	keda := map[string]bool{}
	scaledMax := map[string]int32{}
	var shutdown time.Duration
	var cluster *cnpgv1.Cluster
	var policies []*networkingv1.NetworkPolicy
	var jobs []*batchv1.Job
	var services []*corev1.Service
	accounts := map[string]*corev1.ServiceAccount{}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	var certs []*cmv1.Certificate
	var issuers []*cmv1.Issuer
	config := map[string]string{}
	var testPods []*corev1.Pod
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *cmv1.Issuer:
			issuers = append(issuers, v)
		case *batchv1.Job:
			jobs = append(jobs, v)
		case *corev1.Service:
			services = append(services, v)
		case *corev1.ServiceAccount:
			accounts[v.Name] = v
		case *corev1.PersistentVolumeClaim:
			claims[v.Name] = v
		case *cmv1.Certificate:
			certs = append(certs, v)
		case *networkingv1.NetworkPolicy:
			policies = append(policies, v)
		case *appsv1.Deployment:
			deployments[v.Name] = v
		case *monitoringv1.PodMonitor:
			monitors = append(monitors, v)
		case *monitoringv1.PrometheusRule:
			rules = append(rules, v)
		case *policyv1.PodDisruptionBudget:
			pdbList = append(pdbList, v)
			if v.Spec.Selector != nil {
				pdbs[v.Spec.Selector.MatchLabels["app.kubernetes.io/name"]] = true
			}
		case *kedav1alpha1.ScaledObject:
			scaledObjects = append(scaledObjects, v)
			keda[v.Spec.ScaleTargetRef.Name] = true
			if v.Spec.MaxReplicaCount != nil {
				scaledMax[v.Spec.ScaleTargetRef.Name] = *v.Spec.MaxReplicaCount
			}
		case *corev1.ConfigMap:
			if v.Name == "archivist" {
				config = v.Data
			}
			if s, ok := v.Data["SHUTDOWN_TIMEOUT"]; ok {
				d, err := time.ParseDuration(s)
				if err != nil {
					fail("ConfigMap %s: SHUTDOWN_TIMEOUT %q: %v", v.Name, s, err)
				}
				shutdown = d
			}
		case *cnpgv1.Cluster:
			cluster = v
		case *corev1.Pod:
			testPods = append(testPods, v)
		}
	}
	for _, o := range objs {
		if h, ok := o.Value.(*autoscalingv2.HorizontalPodAutoscaler); ok && keda[h.Spec.ScaleTargetRef.Name] {
			fail("HorizontalPodAutoscaler %s and a KEDA ScaledObject both scale Deployment %s", h.Name, h.Spec.ScaleTargetRef.Name)
		}
	}
	for _, svc := range Deployed() {
		d, ok := deployments[svc]
		if !ok {
			fail("service %s has no Deployment", svc)
			continue
		}
		checkDeployment(d, shutdown, fail)
		checkPodRuntime(d, shutdown, fail)
		checkSpread(d, keda[svc], fail)
		if keda[svc] {
			checkScaledReplicas(d, fail)
		}
		checkImage("Deployment "+svc, container(d).Image, fail)
		if hasEnv(d, "DATABASE_URL") {
			checkDatabaseURL("Deployment "+svc, envValue(d, "DATABASE_URL"), fail)
		}
		checkWorkAreaStorage(d, claims, fail)
		if !pdbs[svc] {
			fail("Deployment %s has no PodDisruptionBudget", svc)
		}
	}
	for _, p := range pdbList {
		checkPDBEviction(p, fail)
	}
	for _, so := range scaledObjects {
		checkScaledObject(so, natsNamespace(config["NATS_URL"]), fail)
		checkScalerReachesService(so, services, fail)
	}
	checkMonitoringSelected(monitors, rules, fail)
	for _, j := range jobs {
		for _, c := range j.Spec.Template.Spec.Containers {
			checkImage("Job "+j.Name, c.Image, fail)
			for _, e := range c.Env {
				if e.Name == "DATABASE_URL" && e.Value != "" {
					checkDatabaseURL("Job "+j.Name, e.Value, fail)
				}
			}
		}
	}
	// NetworkPolicies are all or nothing: none (networkPolicies.enabled
	// false, a cluster without a policy engine) is the operator's choice;
	// some must be the whole set, or a pod is cut off or left open.
	if len(policies) > 0 {
		checkNetworkPolicies(policies, deployments, fail)
	}
	checkAPIServices(services, deployments, fail)
	checkBlobAccess(config, accounts, deployments, fail)
	checkCredentials(config, deployments, fail)
	checkTests(testPods, services, policies, fail)
	if cluster != nil {
		checkConnectionBudget(cluster, config, deployments, scaledMax, len(jobs), fail)
	}
	pods := map[string]corev1.PodSpec{}
	for name, d := range deployments {
		pods["Deployment "+name] = d.Spec.Template.Spec
	}
	for _, j := range jobs {
		pods["Job "+j.Name] = j.Spec.Template.Spec
	}
	checkNATSClients(config, certs, issuers, pods, fail)
	checkMigration(config, jobs, fail)
	if d, ok := deployments["curator"]; ok {
		checkSharedWorkArea(d, claims, fail)
	}
	roles := map[string]bool{}
	if cluster != nil && cluster.Spec.Managed != nil {
		for _, r := range cluster.Spec.Managed.Roles {
			roles[r.Name] = r.Login && r.Ensure == cnpgv1.EnsurePresent && r.PasswordSecret != nil && r.PasswordSecret.Name != ""
		}
	}
	for name, d := range deployments {
		if !hasEnv(d, "DATABASE_URL") {
			continue
		}
		u := envValue(d, "DATABASE_URL")
		switch {
		case cluster == nil && strings.Contains(u, "archivist-db-rw"):
			fail("Deployment %s connects to the CloudNativePG Cluster archivist-db, which the chart does not make", name)
		case cluster != nil && !roles[name]:
			fail("Deployment %s uses PostgreSQL but has no runtime role in the Cluster", name)
		case cluster != nil && !strings.Contains(u, cluster.Name+"-rw"):
			fail("Deployment %s does not connect to the Cluster's -rw service", name)
		}
		if !strings.Contains(u, "sslmode=verify-full") || !strings.Contains(u, "sslrootcert=") {
			fail("Deployment %s connects to PostgreSQL without checking its certificate (sslmode=verify-full with sslrootcert)", name)
		}
	}
	return errors.Join(errs...)
}

func checkDeployment(d *appsv1.Deployment, shutdown time.Duration, fail func(string, ...any)) {
	name := d.Name
	for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/part-of"} {
		if d.Labels[l] == "" || d.Spec.Template.Labels[l] == "" {
			fail("Deployment %s lacks label %s on itself or its pods", name, l)
		}
	}
	spec := d.Spec.Template.Spec
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		fail("Deployment %s does not run as non-root", name)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown {
		fail("Deployment %s: termination grace must be longer than SHUTDOWN_TIMEOUT %s", name, shutdown)
	}
	if len(spec.Containers) == 0 {
		fail("Deployment %s has no container", name)
		return
	}
	for _, c := range spec.Containers {
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			fail("Deployment %s container %s: readiness probe must GET /readyz", name, c.Name)
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			fail("Deployment %s container %s: liveness probe must GET /healthz", name, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			fail("Deployment %s container %s: needs cpu and memory requests and a memory limit", name, c.Name)
		}
		if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			fail("Deployment %s container %s: must not allow privilege escalation", name, c.Name)
		}
	}
	checkWritablePaths("Deployment "+name, spec, fail)
	if envValue(d, "NATS_USER") != name {
		fail("Deployment %s: NATS_USER must be its own NATS user %q", name, name)
	}
	if !envFromSecret(d, "NATS_PASSWORD") {
		fail("Deployment %s: NATS_PASSWORD must come from a Secret", name)
	}
	if _, err := events.PermissionsOf(name); err != nil {
		fail("Deployment %s: %v", name, err)
	}
}
