package k8s_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/archivist/archivist/k8s"
)

func TestOverlays(t *testing.T) {
	for _, o := range []string{"overlays/dev", "overlays/prod"} {
		t.Run(o, func(t *testing.T) {
			objs, err := k8s.Overlay(o)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.Kind]++
			}
			if kinds["Deployment"] != 8 || kinds["PodDisruptionBudget"] != 8 || kinds["Job"] != 1 || kinds["Cluster"] != 1 || kinds["ScaledObject"] != 2 || kinds["NetworkPolicy"] != 10 || kinds["Certificate"] != 2 || kinds["Issuer"] != 2 ||
				kinds["PodMonitor"] != 1 || kinds["PrometheusRule"] != 1 {
				t.Errorf("objects by kind: %v", kinds)
			}
		})
	}
}

// TestNATSNamespace: the nats namespace's objects pass, and each fault is
// refused: the monitoring port open beyond KEDA and Prometheus, no default
// deny, the client port open to every pod, a server certificate that does
// not name the host the services dial, and the chart's TLS turned off.
func TestNATSNamespace(t *testing.T) {
	objs, err := k8s.Overlay("overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	var url string
	for _, o := range objs {
		if cm, ok := o.Value.(*corev1.ConfigMap); ok && cm.Name == "archivist" {
			url = cm.Data["NATS_URL"]
		}
	}
	if _, err := k8s.NATSNamespace("nats", url); err != nil {
		t.Fatal(err)
	}
	docs, err := k8s.Build("nats")
	if err != nil {
		t.Fatal(err)
	}
	check := func(docs [][]byte, url string) error {
		var objs []k8s.Object
		for _, d := range docs {
			o, err := k8s.Decode(d)
			if err != nil {
				return err
			}
			objs = append(objs, o)
		}
		return k8s.CheckNATSNamespace(objs, url)
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
		{"certificate without the service's name", "name: nats-server", "  - nats.nats.svc.cluster.local\n", "", "does not name nats.nats.svc.cluster.local"},
		{"unknown field in the certificate", "name: nats-server", "dnsNames:", "dnsName:", "unknown field"},
		{"the server certificate from a ClusterIssuer", "name: nats-server", "kind: Issuer", "kind: ClusterIssuer", "want the namespaced Issuer nats-ca"},
		{"the servers' Issuer not a CA", "kind: Issuer\nmetadata:\n  name: nats-ca", "secretName: nats-ca", "secretName: something-else", "does not sign with a CA Certificate's Secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := check(mutate(t, docs, c.marker, c.old, c.new), url); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	t.Run("the chart's TLS off", func(t *testing.T) {
		fileFaults(t, "nats/values.yaml", k8s.CheckNATSValues, []fault{
			{"  nats:\n    tls:\n      enabled: true", "  nats:\n    tls:\n      enabled: false", "config.nats.tls"},
			{"    replicas: 3\n    tls:\n      enabled: true", "    replicas: 3\n    tls:\n      enabled: false", "config.cluster.tls"},
			{"tlsCA:\n  enabled: true", "tlsCA:\n  enabled: false", "tlsCA"},
			{"configMapName: nats-client-cas", "secretName: nats-server-tls", "tlsCA must be enabled from the ConfigMap"},
			{"        ca_file: /etc/nats-certs/cluster/ca.crt", "        ca_file: /etc/elsewhere", "routes check each other"},
			{"        verify: true", "        verify: false", "verify must be true"},
		})
	})
}

func TestNATSValuesAndCompose(t *testing.T) {
	if err := k8s.CheckNATSValues("nats/values.yaml"); err != nil {
		t.Error(err)
	}
	if err := k8s.CheckCompose("../compose.yaml"); err != nil {
		t.Error(err)
	}
}

// exportedMetrics are the metric names the Go code of the repository
// registers (the literal names of its metrics and gauges).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	re := regexp.MustCompile(`"(archivist_[a-z_]+)"`)
	for _, dir := range []string{"../pkg", "../services", "../events"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				known[m[1]] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return known
}

// TestAlerts: every alert names metrics the code exports, has a severity,
// a summary and a runbook section; a rule on an unknown metric or without
// its runbook is refused.
func TestAlerts(t *testing.T) {
	objs, err := k8s.Overlay("overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	known := exportedMetrics(t)
	if err := k8s.CheckMonitoring(objs, string(runbook), known); err != nil {
		t.Fatal(err)
	}
	docs := base(t)
	for _, c := range []struct{ old, new, want string }{
		{"archivist_index_oldest_unindexed_seconds) > 3600", "archivist_index_oldest_file_seconds) > 3600", "not one Archivist exports"},
		{"RUNBOOK.md#archivistindexstale", "RUNBOOK.md#nowhere", "names no section"},
		{"port: admin", "port: http", "no PodMonitor"},
	} {
		mutated, err := decodeAllUnchecked(mutate(t, docs, "monitoring.coreos.com", c.old, c.new))
		if err != nil {
			t.Fatal(err)
		}
		if err := k8s.CheckMonitoring(mutated, string(runbook), known); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q → %q: %v, want an error mentioning %q", c.old, c.new, err, c.want)
		}
	}
}

// decodeAllUnchecked decodes without the overlay's checks.
func decodeAllUnchecked(docs [][]byte) ([]k8s.Object, error) {
	var objs []k8s.Object
	for _, d := range docs {
		o, err := k8s.Decode(d)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// TestComposeFaults: compose publishing a port beyond the machine, or
// publishing NATS or PostgreSQL at all, is refused.
func TestComposeFaults(t *testing.T) {
	fileFaults(t, "../compose.yaml", k8s.CheckCompose, []fault{
		{`ports: ["127.0.0.1:${CURATOR_PORT:-8080}:8080"]`, `ports: ["${CURATOR_PORT:-8080}:8080"]`, "beyond this machine"},
		{"    volumes: [nats:/data,", "    ports: [\"127.0.0.1:4222:4222\"]\n    volumes: [nats:/data,", "nats: its ports must not be published"},
		{"    volumes: [pg:/var/lib/postgresql/data]\n", "    ports: [\"127.0.0.1:5432:5432\"]\n    volumes: [pg:/var/lib/postgresql/data]\n", "postgres: its port must not be published"},
		{"    - keys:/etc/archivist/keys:ro\n  healthcheck:", "    - ./deploy/compose/api-keys:/etc/archivist/api-keys:ro\n  healthcheck:", "never committed"},
		{`command: ["key", "init", "/etc/archivist/keys"]`, `command: ["key", "token", "/etc/archivist/keys"]`, "archivist key init"},
	})
}

// TestDockerfile: the image makes /blobs, where compose mounts the blobs
// volume, owned by the user it runs as; without it every service fails to
// write there and restarts for ever.
func TestDockerfile(t *testing.T) {
	if err := k8s.CheckDockerfile("../Dockerfile", "../compose.yaml"); err != nil {
		t.Fatal(err)
	}
	check := func(p string) error { return k8s.CheckDockerfile(p, "../compose.yaml") }
	fileFaults(t, "../Dockerfile", check, []fault{
		{"COPY --from=build --chown=65532:65532 /out/blobs /blobs\n", "", "/blobs, where compose mounts volume blobs"},
		{"--chown=65532:65532 /out/blobs", "/out/blobs", "/blobs, where compose mounts volume blobs"},
		{"USER nonroot:nonroot", "USER root", "non-root"},
		{"COPY services/cwa/go.mod services/cwa/go.sum services/cwa/\n", "", "services/cwa/go.mod is not copied before COPY . ."},
		{"RUN cd services/${SERVICE} && go mod download\n", "", "no `go mod download`"},
		{"GOWORK=off", "", "ENV GOWORK=off"},
	})
}

// TestRepository: no build output or dump tracked, and what a release
// needs is there.
func TestRepository(t *testing.T) {
	if err := k8s.CheckRepository(".."); err != nil {
		t.Fatal(err)
	}
	// A 48 MB binary such as the one once committed, tracked in a copy.
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for name, size := range map[string]int{"LICENSE": 10, "CHANGELOG.md": 10, "services/archivist/archivist": 2 << 20, "services/indexer/testdata/big.warc.gz": 2 << 20} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", ".")
	err := k8s.CheckRepository(dir)
	for _, want := range []string{"services/archivist/archivist: 2097152 bytes tracked", ".dockerignore missing"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRepository: %v, want %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "big.warc.gz") {
		t.Errorf("CheckRepository refused test data: %v", err)
	}
}

// fault is a change to a file that its check must refuse, saying want.
type fault struct{ old, new, want string }

// fileFaults writes the file at path with each fault made, in a directory
// of its own beside the original's name, and wants check to refuse it.
func fileFaults(t *testing.T, path string, check func(string) error, faults []fault) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range faults {
		if !strings.Contains(string(b), f.old) {
			t.Fatalf("%s has no %q", path, f.old)
		}
		p := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), f.old, f.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := check(p); err == nil || !strings.Contains(err.Error(), f.want) {
			t.Errorf("%s with %q made %q: %v, want an error mentioning %q", path, f.old, f.new, err, f.want)
		}
	}
}

func base(t *testing.T) [][]byte {
	t.Helper()
	docs, err := k8s.Build("overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func decodeAll(t *testing.T, docs [][]byte) ([]k8s.Object, error) {
	t.Helper()
	var objs []k8s.Object
	for _, d := range docs {
		o, err := k8s.Decode(d)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, k8s.Check(objs)
}

// mutate changes the first document containing marker.
func mutate(t *testing.T, docs [][]byte, marker, old, new string) [][]byte {
	t.Helper()
	out := make([][]byte, len(docs))
	copy(out, docs)
	for i, d := range out {
		if strings.Contains(string(d), marker) && strings.Contains(string(d), old) {
			out[i] = []byte(strings.Replace(string(d), old, new, 1))
			return out
		}
	}
	t.Fatalf("no document with %q and %q", marker, old)
	return nil
}

// TestValidationCatchesFaults: the faults CI must refuse.
func TestValidationCatchesFaults(t *testing.T) {
	docs := base(t)
	if _, err := decodeAll(t, docs); err != nil {
		t.Fatalf("the unmodified manifests fail: %v", err)
	}
	for _, c := range []struct {
		name, marker, old, new, want string
	}{
		{"unknown field in a Deployment", "name: curator", "terminationGracePeriodSeconds:", "terminationGracePeriodSecond:", "unknown field"},
		{"unknown field in the CNPG Cluster", "kind: Cluster", "instances:", "instancez:", "unknown field"},
		{"unknown field in a ScaledObject", "kind: ScaledObject", "cooldownPeriod:", "cooldownPeriods:", "unknown field"},
		{"readiness probe lost", "name: cwa\n", "readinessProbe:", "startupProbe:", "readiness probe"},
		{"a service without its NATS user", "name: pwa\n", "value: pwa", "value: curator", "NATS_USER"},
		{"grace shorter than the shutdown", "name: auditor\n", "terminationGracePeriodSeconds: 40", "terminationGracePeriodSeconds: 10", "termination grace"},
		{"KEDA on a consumer that does not exist", "kind: ScaledObject", "consumer: indexers", "consumer: nobody", "no Archivist consumer"},
		{"KEDA on the chart's ClusterIP Service", "consumer: indexers", "nats-headless.nats.svc.cluster.local:8222", "nats.nats.svc.cluster.local:8222", "does not resolve in the NATS chart's naming"},
		{"researchers scaled on the pwa-limited queue", "name: researcher\n", "  - metadata:\n      format: prometheus\n      targetValue: \"2\"\n      url: http://pwa.archivist.svc.cluster.local:9090/metrics\n      valueLocation: archivist_research_open_episodes\n    type: metrics-api\n",
			"  - metadata:\n      natsServerMonitoringEndpoint: nats-headless.nats.svc.cluster.local:8222\n      stream: RESEARCH_WORK\n      consumer: researchers\n      lagThreshold: \"2\"\n    type: nats-jetstream\n", "the pwa keeps short"},
		{"researchers scaled on another metric", "name: researcher\n", "valueLocation: archivist_research_open_episodes", "valueLocation: up", "must read"},
		{"runs as root", "name: indexer\n", "runAsNonRoot: true", "runAsNonRoot: false", "non-root"},
		{"no default deny", "name: default-deny-ingress", "podSelector: {}", "podSelector: {matchLabels: {x: y}}", "default-deny"},
		{"no default deny of egress", "name: default-deny-egress", "  policyTypes:\n  - Egress", "  policyTypes:\n  - Ingress", "no default-deny-egress"},
		{"an egress rule on every port", "name: archivist-egress-ingest", "  - ports:\n    - port: 80\n    - port: 443\n    to:", "  - to:", "egress rule without ports"},
		{"no way to NATS", "name: archivist-egress\n", "    - port: 4222\n", "    - port: 4223\n", "reach NATS"},
		{"an API open to every pod", "name: archivist-apis", "    - namespaceSelector: {}\n      podSelector:\n        matchLabels:\n          archivist.io/api-client: \"true\"\n", "    - namespaceSelector: {}\n", "every pod of every namespace"},
		{"PostgreSQL without a certificate check", "name: cwa\n", "sslmode=verify-full", "sslmode=require", "without checking its certificate"},
		{"the dashboard not an API client", "name: dashboard\n", "archivist.io/api-client: \"true\"", "archivist.io/api-client: \"false\"", "keep it from the APIs"},
		{"an API pod without the keys", "name: pwa\n", "secretName: archivist-api-keys", "secretName: something-else", "pwa does not mount the API keys"},
		{"the aggregator's temporary files on the read-only root", "name: aggregator\n", "        - mountPath: /tmp\n          name: tmp\n", "", "aggregator writes /tmp"},
		{"the ingest working area on the read-only root", "name: curator\n", "        - mountPath: /var/lib/archivist/ingest\n          name: ingest\n", "", "curator writes /var/lib/archivist/ingest"},
		{"a writable root filesystem", "name: indexer\n", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "must be read-only"},
		{"the aggregator's CDX API without a Service", "port: 8084", "targetPort: http", "targetPort: admin", "no Service exposes the API of aggregator"},
		{"the aggregator listening elsewhere", "name: aggregator\n", "value: :8084", "value: :9999", "its API must listen"},
		{"a placeholder bucket endpoint", "kind: ConfigMap", "endpoint=s3.amazonaws.com", "endpoint=s3.example.internal", "placeholder"},
		{"a blob service without an identity", "name: indexer\n", "serviceAccountName: archivist-blob", "serviceAccountName: default", "indexer uses the blob store but runs as no ServiceAccount"},
		{"a blob service without the static keys' Secret", "name: auditor\n", "name: S3_SECRET_ACCESS_KEY\n          valueFrom:\n            secretKeyRef:\n              key: secret-access-key\n              name: archivist-s3\n              optional: true\n", "name: S3_SECRET_ACCESS_KEY\n          value: in-the-manifest\n", "auditor uses the blob store without S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY from the Secret"},
		{"the researcher writing the blob store", "name: researcher\n", "serviceAccountName: archivist-blob-reader", "serviceAccountName: archivist-blob", "want archivist-blob-reader"},
		{"the researcher with the writer's keys", "name: researcher\n", "              name: archivist-s3-reader\n", "              name: archivist-s3\n", "from the Secret archivist-s3-reader"},
		{"connections beyond max_connections", "kind: Cluster", "max_connections: \"300\"", "max_connections: \"100\"", "PostgreSQL connections: the services may open"},
		{"a pool grown past the budget", "name: indexer\n", "name: DATABASE_MAX_CONNS\n          value: \"4\"", "name: DATABASE_MAX_CONNS\n          value: \"30\"", "indexer 10×30"},
		{"the migration skipping missing roles", "kind: Job", "value: \"true\"", "value: \"false\"", "MIGRATE_REQUIRE_ROLES must be true"},
		{"the migrate Job kept for a day", "kind: Job", "ttlSecondsAfterFinished: 300", "ttlSecondsAfterFinished: 86400", "ttlSecondsAfterFinished must be at most 600"},
		{"services migrating on start", "kind: ConfigMap", "MIGRATE_ON_START: \"false\"", "MIGRATE_ON_START: \"true\"", "MIGRATE_ON_START must be false"},
		{"the ingest working area per pod", "name: curator\n", "persistentVolumeClaim:\n          claimName: archivist-ingest", "emptyDir:\n          sizeLimit: 50Gi", "must be a ReadWriteMany volume claim"},
		{"the ingest working area on a single-node claim", "name: archivist-ingest", "ReadWriteMany", "ReadWriteOnce", "must be a ReadWriteMany volume claim"},
		{"NATS without TLS", "kind: ConfigMap", "NATS_URL: tls://", "NATS_URL: nats://", "must be tls://"},
		{"the NATS server not checked", "kind: ConfigMap", "NATS_TLS_CA_FILE:", "NATS_TLS_CA_FILES:", "NATS_TLS_CA_FILE is not set"},
		{"a pod without the NATS client certificate", "name: researcher\n", "secretName: archivist-nats-client", "secretName: other", "Deployment researcher does not mount Secret archivist-nats-client"},
		{"a pod without the NATS servers' CA", "name: researcher\n", "name: nats-server-ca", "name: other", "Deployment researcher does not mount ConfigMap nats-server-ca"},
		{"the client certificate from a ClusterIssuer", "name: archivist-nats-client\n", "kind: Issuer", "kind: ClusterIssuer", "want the namespaced Issuer archivist-nats-client-ca"},
		{"the migrate Job without the NATS CA", "kind: Job", "mountPath: /etc/archivist/nats-tls", "mountPath: /etc/elsewhere", "Job archivist-migrate does not mount"},
		{"no client certificate issued", "name: archivist-nats-client\n", "secretName: archivist-nats-client", "secretName: another", "no cert-manager Certificate issues Secret archivist-nats-client"},
		{"unknown field in a Certificate", "name: archivist-nats-client\n", "renewBefore:", "renewBeforeX:", "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeAll(t, mutate(t, docs, c.marker, c.old, c.new))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	t.Run("a Deployment missing", func(t *testing.T) {
		var kept [][]byte
		for _, d := range docs {
			if !(strings.Contains(string(d), "kind: Deployment") && strings.Contains(string(d), "name: researcher\n")) {
				kept = append(kept, d)
			}
		}
		if _, err := decodeAll(t, kept); err == nil || !strings.Contains(err.Error(), "researcher has no Deployment") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("HPA and KEDA on one Deployment", func(t *testing.T) {
		objs, err := decodeAll(t, docs)
		if err != nil {
			t.Fatal(err)
		}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		hpa.Name = "researcher"
		hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name = "Deployment", "researcher"
		objs = append(objs, k8s.Object{Kind: "HorizontalPodAutoscaler", Name: "researcher", Value: hpa})
		if err := k8s.Check(objs); err == nil || !strings.Contains(err.Error(), "both scale") {
			t.Errorf("error %v", err)
		}
	})
}
