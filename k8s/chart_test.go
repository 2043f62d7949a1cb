package k8s_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cnpgv1 "github.com/cloudnative-pg/api/pkg/api/v1"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/archivist/archivist/k8s"
)

// chartObjects renders the chart with values and checks it.
func chartObjects(t *testing.T, values map[string]any) []k8s.Object {
	t.Helper()
	objs, err := k8s.Chart(chartDir, k8s.DefaultRelease, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find[T any](objs []k8s.Object, name string) T {
	var zero T
	for _, o := range objs {
		if v, ok := o.Value.(T); ok && o.Name == name {
			return v
		}
	}
	return zero
}

// TestChartRefusesBadValues: the chart refuses, before anything is
// applied, what would install and not work: several curators on the
// default (block) storage class, a credentials mode that does not exist,
// IRSA without its roles, a memory limit GOMEMLIMIT cannot be made from, a
// misspelt value, monitoring that Prometheus would not select.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"several curators on the default class", map[string]any{"services": map[string]any{"curator": map[string]any{"replicas": 3}}}, "set ingest.storageClass to a file class"},
		{"a credentials mode that does not exist", map[string]any{"blob": map[string]any{"credentials": "magic"}}, "credentials"},
		{"IRSA without its roles", map[string]any{"blob": map[string]any{"credentials": "irsa"}}, "writerRoleArn"},
		{"a memory limit in bytes", map[string]any{"services": map[string]any{"pwa": map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"memory": "1073741824"}}}}}, "limits/memory"},
		{"a misspelt value", map[string]any{"ingest": map[string]any{"storageClas": "efs-sc"}}, "storageClas"},
		{"monitoring without the release label", map[string]any{"monitoring": map[string]any{"labels": map[string]any{"release": nil}}}, "release"},
		{"the latest tag", map[string]any{"image": map[string]any{"tag": "latest"}}, "tag"},
		{"NATS without TLS", map[string]any{"nats": map[string]any{"url": "nats://nats.nats:4222"}}, "url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, c.values)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("render: %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// TestChartNamespacesFromValues: the namespaces of NATS, Prometheus, KEDA
// and CloudNativePG are values, and every object that names one follows:
// the NATS URL, KEDA's endpoint, the NetworkPolicies; the release's own
// namespace is the one it is installed in.
func TestChartNamespacesFromValues(t *testing.T) {
	values := map[string]any{"namespaces": map[string]any{"nats": "messaging", "monitoring": "observability", "keda": "autoscaling", "cnpg": "databases"}}
	objs, err := k8s.Chart(chartDir, k8s.Release{Name: "archive", Namespace: "preservation"}, values)
	if err != nil {
		t.Fatal(err)
	}
	cm := find[*corev1.ConfigMap](objs, "archivist")
	if got := cm.Data["NATS_URL"]; got != "tls://nats.messaging.svc.cluster.local:4222" {
		t.Errorf("NATS_URL %s", got)
	}
	so := find[*kedav1alpha1.ScaledObject](objs, "indexer")
	if got := so.Spec.Triggers[0].Metadata["natsServerMonitoringEndpoint"]; got != "nats-headless.messaging.svc.cluster.local:8222" {
		t.Errorf("KEDA's NATS endpoint %s", got)
	}
	if got := find[*kedav1alpha1.ScaledObject](objs, "researcher").Spec.Triggers[0].Metadata["url"]; got != "http://pwa.preservation.svc.cluster.local:9090/metrics" {
		t.Errorf("KEDA's pwa url %s", got)
	}
	from := func(policy string) []string {
		var names []string
		p := find[*networkingv1.NetworkPolicy](objs, policy)
		for _, r := range p.Spec.Ingress {
			for _, f := range r.From {
				if f.NamespaceSelector != nil {
					names = append(names, f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				}
			}
		}
		for _, r := range p.Spec.Egress {
			for _, f := range r.To {
				if f.NamespaceSelector != nil {
					names = append(names, f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				}
			}
		}
		return names
	}
	for policy, ns := range map[string]string{"archivist-admin": "observability", "archivist-keda": "autoscaling", "archivist-db": "databases", "archivist-egress": "messaging"} {
		if !slices.Contains(from(policy), ns) {
			t.Errorf("NetworkPolicy %s: namespaces %v, want %s", policy, from(policy), ns)
		}
	}
	d := find[*appsv1.Deployment](objs, "cwa")
	if !strings.Contains(envOf(d, "DATABASE_URL"), "archivist-db-rw.preservation.svc") {
		t.Errorf("DATABASE_URL %s", envOf(d, "DATABASE_URL"))
	}
}

// TestChartSettingsRollThePods: a change of the settings changes every
// Deployment's pod template (its checksum/config), so the pods restart
// with it; the migrate Job is a new one for new images and the same one
// for the same (a GitOps sync leaves it be).
func TestChartSettingsRollThePods(t *testing.T) {
	checksums := func(values map[string]any) (map[string]string, string) {
		sums := map[string]string{}
		job := ""
		for _, o := range chartObjects(t, values) {
			switch v := o.Value.(type) {
			case *appsv1.Deployment:
				sums[v.Name] = v.Spec.Template.Annotations["checksum/config"]
			case *batchv1.Job:
				job = v.Name
			}
		}
		return sums, job
	}
	a, jobA := checksums(nil)
	b, jobB := checksums(map[string]any{"blob": map[string]any{"bucket": "another-bucket"}})
	_, again := checksums(nil)
	for name := range a {
		if a[name] == "" || a[name] == b[name] {
			t.Errorf("Deployment %s: checksum/config %q unchanged by a new bucket", name, a[name])
		}
	}
	if jobA != jobB || jobA != again {
		t.Errorf("migrate Jobs: %s, rendered again %s, with a new bucket %s: want one name for one spec", jobA, again, jobB)
	}
	// The Job's name is a digest of everything it runs: a change of any
	// of it makes a new Job (an upgrade that kept the name failed as
	// immutable: a Job's pod template cannot change).
	digest := "sha256:" + strings.Repeat("cd", 32)
	for what, values := range map[string]map[string]any{
		"a new tag":         {"image": map[string]any{"tag": "0.2.1"}},
		"another registry":  {"image": map[string]any{"registry": "registry.example.org/archive"}},
		"the CLI's digest":  {"image": map[string]any{"digests": map[string]any{"archivist": digest}}},
		"a pull secret":     {"image": map[string]any{"pullSecrets": []any{"regcred"}}},
		"another wait":      {"migrations": map[string]any{"wait": "20m"}},
		"another pull rule": {"image": map[string]any{"pullPolicy": "Always"}},
	} {
		if _, job := checksums(values); job == jobA || job == "" {
			t.Errorf("migrate Job with %s: %q, the same as before (%s)", what, job, jobA)
		}
	}
}

// TestChartScaling: with KEDA the scaled Deployments leave replicas to it;
// without, they have the values' replicas and no ScaledObject is made.
func TestChartScaling(t *testing.T) {
	on := chartObjects(t, nil)
	if r := find[*appsv1.Deployment](on, "researcher").Spec.Replicas; r != nil {
		t.Errorf("researcher with KEDA: replicas %d", *r)
	}
	off := chartObjects(t, map[string]any{"keda": map[string]any{"enabled": false}, "services": map[string]any{"indexer": map[string]any{"replicas": 4}}})
	if r := find[*appsv1.Deployment](off, "indexer").Spec.Replicas; r == nil || *r != 4 {
		t.Errorf("indexer without KEDA: replicas %v, want 4", r)
	}
	if so := find[*kedav1alpha1.ScaledObject](off, "indexer"); so != nil {
		t.Error("a ScaledObject without KEDA")
	}
}

// TestChartBlobCredentials: each credentials mode gives the blob services
// what the S3 client takes: the Secrets' keys, the ServiceAccounts' IRSA
// roles, a projected token for a web identity, nothing for Pod Identity.
func TestChartBlobCredentials(t *testing.T) {
	roles := map[string]any{"writerRoleArn": "arn:aws:iam::123456789012:role/w", "readerRoleArn": "arn:aws:iam::123456789012:role/r"}
	with := func(mode string) map[string]any {
		b := map[string]any{"credentials": mode}
		for k, v := range roles {
			b[k] = v
		}
		return map[string]any{"blob": b}
	}
	static := chartObjects(t, with("static"))
	if d := find[*appsv1.Deployment](static, "researcher"); envSecretOf(d, "S3_ACCESS_KEY_ID") != "archivist-s3-reader" {
		t.Errorf("static: the researcher's keys from %q", envSecretOf(d, "S3_ACCESS_KEY_ID"))
	}
	irsa := chartObjects(t, with("irsa"))
	if sa := find[*corev1.ServiceAccount](irsa, "archivist-blob-reader"); sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::123456789012:role/r" {
		t.Errorf("irsa: reader annotations %v", sa.Annotations)
	}
	web := chartObjects(t, with("webIdentity"))
	if d := find[*appsv1.Deployment](web, "auditor"); envOf(d, "AWS_ROLE_ARN") != "arn:aws:iam::123456789012:role/w" || envOf(d, "AWS_WEB_IDENTITY_TOKEN_FILE") == "" {
		t.Errorf("webIdentity: auditor env AWS_ROLE_ARN %q", envOf(d, "AWS_ROLE_ARN"))
	}
	pod := chartObjects(t, with("podIdentity"))
	if d := find[*appsv1.Deployment](pod, "curator"); envOf(d, "S3_ACCESS_KEY_ID") != "" || envSecretOf(d, "S3_ACCESS_KEY_ID") != "" || envOf(d, "AWS_ROLE_ARN") != "" {
		t.Error("podIdentity: the curator is given credentials of its own")
	}
}

func envOf(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envSecretOf(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name
		}
	}
	return ""
}

// TestChartBucketFromValues: the archive's bucket, endpoint and region are
// values (they were fixed in the base manifests, with no example of
// changing them).
func TestChartBucketFromValues(t *testing.T) {
	objs := chartObjects(t, map[string]any{"blob": map[string]any{"bucket": "acme-archive", "endpoint": "s3.eu-west-1.amazonaws.com", "region": "eu-west-1"}})
	want := "s3://acme-archive/?endpoint=s3.eu-west-1.amazonaws.com&region=eu-west-1&secure=true"
	if got := find[*corev1.ConfigMap](objs, "archivist").Data["BLOB_URL"]; got != want {
		t.Errorf("BLOB_URL %s, want %s", got, want)
	}
}

// TestChartPinsDigests: an image with a digest in image.digests runs by
// it (a tag moved in the registry does not change what runs).
func TestChartPinsDigests(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := chartObjects(t, map[string]any{"image": map[string]any{"digests": map[string]any{"curator": digest}}})
	if got := find[*appsv1.Deployment](objs, "curator").Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/archivist/curator:0.2.0@"+digest {
		t.Errorf("curator's image %s", got)
	}
	if got := find[*appsv1.Deployment](objs, "pwa").Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/archivist/pwa:0.2.0" {
		t.Errorf("pwa's image %s", got)
	}
	if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"image": map[string]any{"digests": map[string]any{"curator": "latest"}}}); err == nil {
		t.Error("a digest that is not one was taken")
	}
}

// TestChartSecretsByReference (N26, N33): a credential reaches only the
// pods that use it, from a Secret: the curator takes EZID's and the SMTP
// server's passwords by reference, no other service has them, and the
// schema refuses a secret-like name in the configuration every pod loads.
// Egress to the world leaves out link-local addresses (cloud metadata)
// and the CIDRs given, and the SMTP port is a value.
func TestChartSecretsByReference(t *testing.T) {
	objs := chartObjects(t, map[string]any{"egress": map[string]any{"smtpPorts": []any{587}, "except": []any{"10.0.0.0/8"}}})
	for _, name := range []string{"INGEST_EZID_PASSWORD", "INGEST_SMTP_PASSWORD"} {
		if got := envSecretOf(find[*appsv1.Deployment](objs, "curator"), name); got == "" {
			t.Errorf("the curator's %s is not from a Secret", name)
		}
		for _, svc := range []string{"pwa", "cwa", "researcher", "indexer", "aggregator", "auditor", "dashboard"} {
			if d := find[*appsv1.Deployment](objs, svc); d != nil && (envSecretOf(d, name) != "" || envOf(d, name) != "") {
				t.Errorf("%s has %s", svc, name)
			}
		}
	}
	// Every credential by reference (existingSecret): the names are values.
	named := chartObjects(t, map[string]any{"secrets": map[string]any{
		"nats":     map[string]any{"curator": "vault-nats-curator", "deploy": "vault-nats-deploy"},
		"database": map[string]any{"pwa": "vault-db-pwa"},
	}})
	if got := envSecretOf(find[*appsv1.Deployment](named, "curator"), "NATS_PASSWORD"); got != "vault-nats-curator" {
		t.Errorf("the curator's NATS password from %q, want vault-nats-curator", got)
	}
	if got := envSecretOf(find[*appsv1.Deployment](named, "pwa"), "PGPASSWORD"); got != "vault-db-pwa" {
		t.Errorf("the pwa's database password from %q, want vault-db-pwa", got)
	}
	if got := envSecretOf(find[*appsv1.Deployment](named, "cwa"), "PGPASSWORD"); got != "archivist-db-cwa" {
		t.Errorf("an unnamed service's database password from %q, want archivist-db-cwa", got)
	}
	for _, o := range named {
		if j, ok := o.Value.(*batchv1.Job); ok {
			for _, e := range j.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "NATS_PASSWORD" && e.ValueFrom.SecretKeyRef.Name != "vault-nats-deploy" {
					t.Errorf("the migrate Job's NATS password from %q, want vault-nats-deploy", e.ValueFrom.SecretKeyRef.Name)
				}
			}
		}
		if c, ok := o.Value.(*cnpgv1.Cluster); ok {
			for _, r := range c.Spec.Managed.Roles {
				if r.Name == "pwa" && r.PasswordSecret.Name != "vault-db-pwa" {
					t.Errorf("CloudNativePG sets the pwa's role from %q, want vault-db-pwa", r.PasswordSecret.Name)
				}
			}
		}
	}
	if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"secrets": map[string]any{"nats": map[string]any{"nobody": "x"}}}); err == nil {
		t.Error("a NATS Secret for a user that does not exist was taken")
	}
	// A setting whose credentials cannot reach the service is refused.
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"config": map[string]any{"INGEST_EZID_URL": "https://ezid.cdlib.org"}}, "INGEST_EZID_USER"},
		{map[string]any{"config": map[string]any{"INGEST_EZID_URL": "https://ezid.cdlib.org", "INGEST_EZID_USER": "apitest"}}, "INGEST_EZID_PASSWORD is not from a Secret it must have"},
		{map[string]any{"config": map[string]any{"INGEST_SMTP_USER": "archive"}}, "INGEST_SMTP_PASSWORD is not from a Secret it must have"},
	} {
		if _, err := k8s.Chart(chartDir, k8s.DefaultRelease, c.values); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error mentioning %q", c.values, err, c.want)
		}
	}
	ezid := map[string]any{"config": map[string]any{"INGEST_EZID_URL": "https://ezid.cdlib.org", "INGEST_EZID_USER": "apitest"},
		"services": map[string]any{"curator": map[string]any{"secretEnv": map[string]any{"INGEST_EZID_PASSWORD": map[string]any{"secret": "archivist-ezid", "key": "password", "optional": false}}}}}
	if _, err := k8s.Chart(chartDir, k8s.DefaultRelease, ezid); err != nil {
		t.Errorf("EZID with its password's Secret required: %v", err)
	}
	for _, key := range []string{"INGEST_EZID_PASSWORD", "INGEST_SMTP_PASSWORD", "MY_API_TOKEN", "S3_SECRET", "AWS_SECRET_ACCESS_KEY", "SIGNING_KEY"} {
		if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"config": map[string]any{key: "hunter2"}}); err == nil {
			t.Errorf("config %s (which every pod loads) was taken", key)
		}
	}
	if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"config": map[string]any{"INGEST_EZID_URL": "https://ezid.cdlib.org"}}); err != nil {
		t.Errorf("a plain setting was refused: %v", err)
	}
	for _, name := range []string{"archivist-egress-blob", "archivist-egress-ingest"} {
		np := find[*networkingv1.NetworkPolicy](objs, name)
		if np == nil {
			t.Fatalf("no NetworkPolicy %s", name)
		}
		for _, rule := range np.Spec.Egress {
			for _, to := range rule.To {
				if to.IPBlock != nil && (!slices.Contains(to.IPBlock.Except, "169.254.0.0/16") || !slices.Contains(to.IPBlock.Except, "10.0.0.0/8")) {
					t.Errorf("%s reaches %s except only %v", name, to.IPBlock.CIDR, to.IPBlock.Except)
				}
			}
		}
	}
	var smtp bool
	for _, rule := range find[*networkingv1.NetworkPolicy](objs, "archivist-egress-ingest").Spec.Egress {
		for _, p := range rule.Ports {
			smtp = smtp || (p.Port != nil && p.Port.IntValue() == 587)
		}
	}
	if !smtp {
		t.Error("egress.smtpPorts 587 did not open the curator's way to its SMTP server")
	}
}

// TestChartInstallsAsASubchart: a platform's umbrella chart that depends
// on this one, with the condition archivist.enabled and global values,
// renders it (the schema refused both keys, so it could not be a
// subchart); with the condition false it renders nothing of it.
func TestChartInstallsAsASubchart(t *testing.T) {
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "archivist"), os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: platform\nversion: 1.0.0\nkubeVersion: \">=1.30.0-0\"\n"+
		"dependencies:\n  - name: archivist\n    version: 0.2.0\n    condition: archivist.enabled\n")
	write("values.yaml", "global:\n  team: archive\narchivist:\n  enabled: true\n")
	for _, enabled := range []bool{true, false} {
		docs, err := k8s.RenderChart(parent, k8s.DefaultRelease, map[string]any{"archivist": map[string]any{"enabled": enabled}})
		if err != nil {
			t.Fatalf("enabled %v: %v", enabled, err)
		}
		jobs := 0
		for _, d := range docs {
			if strings.Contains(string(d), "name: archivist-migrate-") {
				jobs++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[enabled]; jobs != want {
			t.Errorf("archivist.enabled %v: %d migrate Jobs rendered, want %d", enabled, jobs, want)
		}
	}
}

// TestChartPlacement: the chart's placement reaches every pod, the
// services' and the migrate Job's; a service's is laid over it
// (nodeSelector, labels and annotations merged, the service's keys
// winning; other keys replaced); topology spread constraints given take
// the place of the chart's own; none given, nothing is added.
func TestChartPlacement(t *testing.T) {
	toleration := map[string]any{"key": "dedicated", "operator": "Equal", "value": "archive", "effect": "NoSchedule"}
	objs := chartObjects(t, map[string]any{
		"placement": map[string]any{
			"nodeSelector":      map[string]any{"pool": "archive", "disk": "ssd"},
			"tolerations":       []any{toleration},
			"priorityClassName": "archive-standard",
			"podLabels":         map[string]any{"team": "archive"},
			"podAnnotations":    map[string]any{"backup.example/skip": "true"},
		},
		"services": map[string]any{"researcher": map[string]any{"placement": map[string]any{
			"nodeSelector":              map[string]any{"pool": "cpu"},
			"priorityClassName":         "research-batch",
			"podLabels":                 map[string]any{"workload": "batch"},
			"affinity":                  map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "arch", "operator": "In", "values": []any{"amd64"}}}}}}}},
			"topologySpreadConstraints": []any{map[string]any{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "researcher"}}}},
		}}},
	})
	curator := find[*appsv1.Deployment](objs, "curator").Spec.Template
	if got := curator.Spec.NodeSelector; got["pool"] != "archive" || got["disk"] != "ssd" {
		t.Errorf("curator's nodeSelector %v", got)
	}
	if len(curator.Spec.Tolerations) != 1 || curator.Spec.Tolerations[0].Key != "dedicated" || curator.Spec.PriorityClassName != "archive-standard" {
		t.Errorf("curator's tolerations %v, priority class %q", curator.Spec.Tolerations, curator.Spec.PriorityClassName)
	}
	if curator.Labels["team"] != "archive" || curator.Annotations["backup.example/skip"] != "true" || curator.Annotations["checksum/config"] == "" {
		t.Errorf("curator's pod labels %v, annotations %v", curator.Labels, curator.Annotations)
	}
	if len(curator.Spec.TopologySpreadConstraints) != 2 {
		t.Errorf("curator keeps the chart's spread over hosts and zones: %d constraints", len(curator.Spec.TopologySpreadConstraints))
	}
	r := find[*appsv1.Deployment](objs, "researcher").Spec.Template
	if got := r.Spec.NodeSelector; got["pool"] != "cpu" || got["disk"] != "ssd" {
		t.Errorf("researcher's nodeSelector %v: want the service's pool over the chart's, the chart's disk kept", got)
	}
	if r.Spec.PriorityClassName != "research-batch" || len(r.Spec.Tolerations) != 1 || r.Spec.Affinity == nil || r.Spec.Affinity.NodeAffinity == nil {
		t.Errorf("researcher's priority class %q, tolerations %v, affinity %v", r.Spec.PriorityClassName, r.Spec.Tolerations, r.Spec.Affinity)
	}
	if r.Labels["team"] != "archive" || r.Labels["workload"] != "batch" || r.Labels["app.kubernetes.io/name"] != "researcher" {
		t.Errorf("researcher's pod labels %v", r.Labels)
	}
	if c := r.Spec.TopologySpreadConstraints; len(c) != 1 || c[0].MaxSkew != 2 {
		t.Errorf("researcher's spread %v: want the one given, in place of the chart's", c)
	}
	var job *batchv1.Job
	for _, o := range objs {
		if j, ok := o.Value.(*batchv1.Job); ok {
			job = j
		}
	}
	if job == nil || job.Spec.Template.Spec.NodeSelector["pool"] != "archive" || job.Spec.Template.Spec.PriorityClassName != "archive-standard" ||
		job.Spec.Template.Labels["team"] != "archive" || len(job.Spec.Template.Spec.Tolerations) != 1 {
		t.Errorf("the migrate Job's placement: %+v", job)
	}
	// None given: no field added.
	plain := find[*appsv1.Deployment](chartObjects(t, nil), "curator").Spec.Template
	if plain.Spec.NodeSelector != nil || plain.Spec.Tolerations != nil || plain.Spec.Affinity != nil || plain.Spec.PriorityClassName != "" {
		t.Errorf("without placement the curator's pod has %v %v %v %q", plain.Spec.NodeSelector, plain.Spec.Tolerations, plain.Spec.Affinity, plain.Spec.PriorityClassName)
	}
	if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"placement": map[string]any{"nodeSelecter": map[string]any{"a": "b"}}}); err == nil {
		t.Error("a misspelt placement key was taken")
	}
}

// TestChartFitsASmallNode: by default every pod's ephemeral storage (its
// emptyDirs) fits a node of 20 GiB, and the researcher's cache is bounded
// by its emptyDir's size (four fifths of cacheSize): a fixed 16 GiB bound
// had a pod with a smaller cache evicted.
func TestChartFitsASmallNode(t *testing.T) {
	for _, o := range chartObjects(t, nil) {
		d, ok := o.Value.(*appsv1.Deployment)
		if !ok {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if q, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; ok && q.Value() > 18<<30 {
				t.Errorf("%s asks for %s of ephemeral storage: more than a 20 GiB node has to give", d.Name, q.String())
			}
		}
	}
	cacheBytes := func(values map[string]any) string {
		for _, e := range find[*appsv1.Deployment](chartObjects(t, values), "researcher").Spec.Template.Spec.Containers[0].Env {
			if e.Name == "RESEARCHER_CACHE_BYTES" {
				return e.Value
			}
		}
		return ""
	}
	if got := cacheBytes(nil); got != "6871947673" {
		t.Errorf("RESEARCHER_CACHE_BYTES %q with the default 8Gi cache, want 6871947673", got)
	}
	if got := cacheBytes(map[string]any{"services": map[string]any{"researcher": map[string]any{"cacheSize": "4Gi"}}}); got != "3435973836" {
		t.Errorf("RESEARCHER_CACHE_BYTES %q with a 4Gi cache, want 3435973836", got)
	}
}

// TestChartPodIdentityIsReachable: with EKS Pod Identity the blob store's
// users may reach the node's agent (169.254.170.23:80), which the egress
// policy's exclusion of link-local addresses otherwise refuses; with
// other credentials no such policy is made.
func TestChartPodIdentityIsReachable(t *testing.T) {
	agent := func(values map[string]any) *networkingv1.NetworkPolicy {
		return find[*networkingv1.NetworkPolicy](chartObjects(t, values), "archivist-egress-pod-identity")
	}
	if p := agent(nil); p != nil {
		t.Errorf("static credentials: a policy to the Pod Identity agent %v", p.Spec)
	}
	p := agent(map[string]any{"blob": map[string]any{"credentials": "podIdentity"}})
	if p == nil || len(p.Spec.Egress) != 1 || p.Spec.Egress[0].To[0].IPBlock.CIDR != "169.254.170.23/32" || p.Spec.Egress[0].Ports[0].Port.IntValue() != 80 {
		t.Fatalf("podIdentity: the agent's policy %+v", p)
	}
	if vals := p.Spec.PodSelector.MatchExpressions[0].Values; !slices.Contains(vals, "researcher") || !slices.Contains(vals, "curator") {
		t.Errorf("the agent's policy selects %v", vals)
	}
}

// TestChartChecksTheWorkingArea: the curator's pod first checks, as the
// service's user, that the shared working area is writable (an NFS class
// may not honour fsGroup), with the service's image and its security.
func TestChartChecksTheWorkingArea(t *testing.T) {
	spec := find[*appsv1.Deployment](chartObjects(t, nil), "curator").Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("curator's init containers: %d, want 1", len(spec.InitContainers))
	}
	c := spec.InitContainers[0]
	if !slices.Equal(c.Args, []string{"writable", "/var/lib/archivist/ingest"}) || c.Image != spec.Containers[0].Image {
		t.Errorf("the working area's check: args %v, image %s (the service's %s)", c.Args, c.Image, spec.Containers[0].Image)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "ingest" || c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("the working area's check mounts %v, security %+v", c.VolumeMounts, c.SecurityContext)
	}
}

// cluster is a Kubernetes API holding objs, for the templates' lookup.
type cluster struct {
	client *dynamicfake.FakeDynamicClient
}

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
	return c.client.Resource(gvr), true, nil
}

// TestChartOneReleasePerNamespace: a second release in a namespace that
// holds one is refused with the reason; the same release upgrades, and
// another namespace takes a release of its own.
func TestChartOneReleasePerNamespace(t *testing.T) {
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "archivist", "namespace": "archive-prod",
			"annotations": map[string]any{"meta.helm.sh/release-name": "archivist", "meta.helm.sh/release-namespace": "archive-prod"}},
	}}
	api := cluster{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), existing)}
	_, err := k8s.RenderChartIn(chartDir, k8s.Release{Name: "staging", Namespace: "archive-prod"}, nil, api)
	if err == nil || !strings.Contains(err.Error(), `namespace archive-prod already holds the Archivist release "archivist"`) {
		t.Errorf("a second release in archive-prod: %v, want it refused naming the first", err)
	}
	if _, err := k8s.RenderChartIn(chartDir, k8s.Release{Name: "archivist", Namespace: "archive-prod"}, nil, api); err != nil {
		t.Errorf("the release itself, upgraded: %v", err)
	}
	if _, err := k8s.RenderChartIn(chartDir, k8s.Release{Name: "staging", Namespace: "archive-staging"}, nil, api); err != nil {
		t.Errorf("a release in a namespace of its own: %v", err)
	}
}

// TestChartBackups: backups by value (CloudNativePG's object store, its
// retention and a ScheduledBackup), a point-in-time recovery from them,
// and the refusals of an incomplete backup.
func TestChartBackups(t *testing.T) {
	backup := map[string]any{"enabled": true, "destinationPath": "s3://backups/archivist", "endpointURL": "https://minio.backup:9000", "s3Secret": "db-backup", "retention": "14d", "schedule": "0 30 2 * * *"}
	objs := chartObjects(t, map[string]any{"postgres": map[string]any{"backup": backup}})
	var cluster *cnpgv1.Cluster
	var scheduled *cnpgv1.ScheduledBackup
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *cnpgv1.Cluster:
			cluster = v
		case *cnpgv1.ScheduledBackup:
			scheduled = v
		}
	}
	if cluster == nil || cluster.Spec.Backup == nil || cluster.Spec.Backup.BarmanObjectStore == nil {
		t.Fatal("no backup in the Cluster")
	}
	store := cluster.Spec.Backup.BarmanObjectStore
	if store.DestinationPath != "s3://backups/archivist" || store.EndpointURL != "https://minio.backup:9000" || cluster.Spec.Backup.RetentionPolicy != "14d" ||
		store.AWS == nil || store.AWS.AccessKeyIDReference == nil || store.AWS.AccessKeyIDReference.Name != "db-backup" || store.Wal == nil {
		t.Errorf("backup: %+v, retention %q", store, cluster.Spec.Backup.RetentionPolicy)
	}
	if scheduled == nil || scheduled.Spec.Schedule != "0 30 2 * * *" || scheduled.Spec.Cluster.Name != cluster.Name {
		t.Errorf("scheduled backup: %+v", scheduled)
	}

	objs = chartObjects(t, map[string]any{"postgres": map[string]any{"backup": backup,
		"recovery": map[string]any{"enabled": true, "serverName": "archivist-db", "targetTime": "2026-11-28T14:02:00Z"}}})
	for _, o := range objs {
		if c, ok := o.Value.(*cnpgv1.Cluster); ok {
			r := c.Spec.Bootstrap.Recovery
			if r == nil || r.Source != "origin" || r.RecoveryTarget == nil || r.RecoveryTarget.TargetTime != "2026-11-28T14:02:00Z" || c.Spec.Bootstrap.InitDB != nil {
				t.Errorf("recovery: %+v", c.Spec.Bootstrap)
			}
			if len(c.Spec.ExternalClusters) != 1 || c.Spec.ExternalClusters[0].Name != "origin" || c.Spec.ExternalClusters[0].BarmanObjectStore.DestinationPath != "s3://backups/archivist" ||
				c.Spec.ExternalClusters[0].BarmanObjectStore.ServerName != "archivist-db" {
				t.Errorf("recovery's source: %+v", c.Spec.ExternalClusters)
			}
		}
	}
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"enabled": true, "s3Secret": "x"}, "needs postgres.backup.destinationPath"},
		{map[string]any{"enabled": true, "destinationPath": "s3://b/p"}, "needs the store's credentials"},
		{map[string]any{"enabled": true, "destinationPath": "/var/backups", "s3Secret": "x"}, "destinationPath"},
	} {
		if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"postgres": map[string]any{"backup": c.values}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error mentioning %q", c.values, err, c.want)
		}
	}
}

// TestChartExternalPostgres: with a managed PostgreSQL the chart makes no
// Cluster; the services and the migrations connect to its host, verify
// its CA from the Secret named, log in with the Secrets named, and reach
// its addresses alone; an incomplete setting is refused.
func TestChartExternalPostgres(t *testing.T) {
	values, err := k8s.ReadValues(filepath.Join(chartDir, "ci", "external-postgres-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := chartObjects(t, values)
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *cnpgv1.Cluster:
			t.Error("a CloudNativePG Cluster beside the external database")
		case *networkingv1.NetworkPolicy:
			if v.Name == "archivist-db" {
				t.Error("a policy for CloudNativePG's pods beside the external database")
			}
			if v.Name == "archivist-egress" {
				found := false
				for _, r := range v.Spec.Egress {
					for _, to := range r.To {
						found = found || (to.IPBlock != nil && to.IPBlock.CIDR == "10.20.0.0/16" && len(r.Ports) == 1 && r.Ports[0].Port.IntValue() == 5432)
					}
				}
				if !found {
					t.Error("no egress to the database's addresses on its port")
				}
			}
		case *batchv1.Job:
			spec := v.Spec.Template.Spec
			for _, e := range spec.Containers[0].Env {
				if e.Name == "PGPASSWORD" && e.ValueFrom.SecretKeyRef.Name != "archivist-db-owner" {
					t.Errorf("the migrations log in with %s, want archivist-db-owner", e.ValueFrom.SecretKeyRef.Name)
				}
				if e.Name == "DATABASE_URL" && !strings.HasPrefix(e.Value, "postgres://archive.cluster-c1x2y3.eu-west-1.rds.amazonaws.com:5432/archivist?") {
					t.Errorf("the migrations connect to %s", e.Value)
				}
			}
			for _, vol := range spec.Volumes {
				if vol.Name == "db-ca" && vol.Secret.SecretName != "rds-ca" {
					t.Errorf("the migrations verify the database against %s, want rds-ca", vol.Secret.SecretName)
				}
			}
		}
	}
	curator := find[*appsv1.Deployment](objs, "curator")
	if got := envSecretOf(curator, "PGPASSWORD"); got != "rds-curator" {
		t.Errorf("the curator logs in with %s, want rds-curator", got)
	}
	if got := envOf(curator, "DATABASE_URL"); !strings.Contains(got, "rds.amazonaws.com:5432") || !strings.Contains(got, "sslmode=verify-full") {
		t.Errorf("the curator connects to %s", got)
	}
	ext := values["postgres"].(map[string]any)["external"].(map[string]any)
	for _, c := range []struct {
		drop, want string
	}{
		{"host", "needs postgres.external.host"},
		{"caSecret", "needs postgres.external.caSecret"},
		{"ownerSecret", "needs postgres.external.ownerSecret"},
		{"cidrs", "needs postgres.external.cidrs"},
	} {
		e := map[string]any{}
		for k, v := range ext {
			if k != c.drop {
				e[k] = v
			}
		}
		if c.drop == "cidrs" {
			e["cidrs"] = []any{}
		} else {
			e[c.drop] = ""
		}
		if _, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, map[string]any{"postgres": map[string]any{"external": e}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("without %s: %v, want an error mentioning %q", c.drop, err, c.want)
		}
	}
}
