package k8s_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/archivist/archivist/k8s"
)

// chartDir is the chart the validation renders.
const chartDir = "../charts/archivist"

// valueSets are the chart's defaults and each example of ci/: every one
// must render, decode strictly and pass the checks.
func valueSets(t *testing.T) map[string]map[string]any {
	t.Helper()
	sets := map[string]map[string]any{"defaults": nil}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no value sets in %s/ci: %v", chartDir, err)
	}
	for _, f := range files {
		v, err := k8s.ReadValues(f)
		if err != nil {
			t.Fatal(err)
		}
		sets[filepath.Base(f)] = v
	}
	return sets
}

// TestChart: the chart with its defaults and with each value set of ci/
// (production on EKS, GKE, AKS, a small install) renders with the Helm
// SDK, decodes strictly into the upstream types and passes every check.
func TestChart(t *testing.T) {
	for name, values := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			objs, err := k8s.Chart(chartDir, k8s.DefaultRelease, values)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.Kind]++
			}
			clusters := 1
			if name == "external-postgres-values.yaml" {
				clusters = 0 // a managed PostgreSQL: no CloudNativePG Cluster
			}
			if kinds["Deployment"] != 8 || kinds["PodDisruptionBudget"] != 8 || kinds["Job"] != 1 || kinds["Cluster"] != clusters || kinds["Certificate"] != 4 || kinds["Issuer"] != 3 || kinds["Pod"] != 1 {
				t.Errorf("objects by kind: %v", kinds)
			}
		})
	}
}

func TestCompose(t *testing.T) {
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
	objs, err := k8s.Chart(chartDir, k8s.DefaultRelease, nil)
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
		{"archivist_index_oldest_unindexed_seconds{", "archivist_index_oldest_file_seconds{", "not one Archivist exports"},
		{`archivist_audit_parked{namespace="archivist"}`, "archivist_audit_parked", "archivist_audit_parked is not selected by namespace"},
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

// TestGrafanaDashboard: the chart's dashboard loads in Grafana's sidecar
// and queries only metrics the services export, in the chosen namespace;
// a panel on a metric that does not exist, or a dashboard that is not
// JSON, is refused.
func TestGrafanaDashboard(t *testing.T) {
	objs, err := k8s.Chart(chartDir, k8s.DefaultRelease, nil)
	if err != nil {
		t.Fatal(err)
	}
	known := exportedMetrics(t)
	if err := k8s.CheckDashboard(objs, "grafana_dashboard", known); err != nil {
		t.Fatal(err)
	}
	docs, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, want string }{
		{"archivist_db_pool_max_connections", "archivist_db_pool_size", "archivist_db_pool_size, which Archivist does not export"},
		{"archivist_http_request_duration_seconds_bucket", "archivist_http_request_seconds_bucket", "does not export"},
		{`"uid": "archivist-pipelines"`, `"uid": "archivist-pipelines",,`, "is not JSON"},
		{`archivist_dead_letters{namespace=\"$namespace\"}`, `archivist_dead_letters`, "does not keep to the chosen namespace"},
	} {
		mutated, err := decodeAllUnchecked(mutate(t, docs, k8s.DashboardConfigMap, c.old, c.new))
		if err != nil {
			t.Fatal(err)
		}
		if err := k8s.CheckDashboard(mutated, "grafana_dashboard", known); err == nil || !strings.Contains(err.Error(), c.want) {
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
		{`command: ["key", "init", "/etc/archivist/keys", "/etc/archivist/operator"]`, `command: ["key", "token", "/etc/archivist/keys"]`, "archivist key init"},
		{`command: ["key", "init", "/etc/archivist/keys", "/etc/archivist/operator"]`, `command: ["key", "init", "/etc/archivist/keys"]`, "operator's key"},
		{"    volumes: [minio:/data]\n", "    ports: [\"127.0.0.1:9000:9000\"]\n    volumes: [minio:/data]\n", "minio: its ports must not be published"},
		{`command: ["blob", "bucket",`, `command: ["blob", "put",`, "archivist blob bucket"},
		{"    BLOB_URL: s3://archive/?endpoint=minio:9000", "    BLOB_URL: file:///blobs\n    X: s3://archive/?endpoint=minio:9000", "want the archive's bucket on the minio service"},
	})
}

// TestDockerfile: the image makes every directory compose mounts a named
// volume on (the keys), owned by the user it runs as; without it every
// service fails to write there and restarts for ever.
func TestDockerfile(t *testing.T) {
	if err := k8s.CheckDockerfile("../Dockerfile", "../compose.yaml"); err != nil {
		t.Fatal(err)
	}
	check := func(p string) error { return k8s.CheckDockerfile(p, "../compose.yaml") }
	fileFaults(t, "../Dockerfile", check, []fault{
		{"COPY --from=build --chown=65532:65532 /out/keys /etc/archivist/keys\n", "", "/etc/archivist/keys, where compose mounts volume keys"},
		{"--chown=65532:65532 /out/keys", "/out/keys", "/etc/archivist/keys, where compose mounts volume keys"},
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

// base is the chart rendered with the production value set.
func base(t *testing.T) [][]byte {
	t.Helper()
	values, err := k8s.ReadValues(filepath.Join(chartDir, "ci", "production-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := k8s.RenderChart(chartDir, k8s.DefaultRelease, values)
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
		{"an API without TLS", "name: auditor\n", "name: API_TLS_CERT_FILE", "name: API_TLS_CERT_FILEX", "auditor serves its API without TLS"},
		{"the dashboard forwarding keys in clear", "name: dashboard\n", "value: https://curator:8080", "value: http://curator:8080", "is not https"},
		{"the aggregator's temporary files on the read-only root", "name: aggregator\n", "        - mountPath: /tmp\n          name: tmp\n", "", "aggregator writes /tmp"},
		{"the ingest working area on the read-only root", "name: curator\n", "        - mountPath: /var/lib/archivist/ingest\n          name: ingest\n", "", "curator writes /var/lib/archivist/ingest"},
		{"a writable root filesystem", "name: indexer\n", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "must be read-only"},
		{"the aggregator's CDX API without a Service", "port: 8084", "targetPort: http", "targetPort: admin", "no Service exposes the API of aggregator"},
		{"the aggregator listening elsewhere", "name: aggregator\n", "value: :8084", "value: :9999", "its API must listen"},
		{"a placeholder bucket endpoint", "kind: ConfigMap", "endpoint=s3.eu-west-1.amazonaws.com", "endpoint=s3.example.internal", "placeholder"},
		{"a blob service without an identity", "name: indexer\n", "serviceAccountName: archivist-blob", "serviceAccountName: default", "indexer uses the blob store but runs as no ServiceAccount"},
		{"IRSA without the role", "name: archivist-blob\n", "    eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/archivist-blob\n", "", "auditor uses the blob store with no credentials"},
		{"the researcher writing the blob store", "name: researcher\n", "serviceAccountName: archivist-blob-reader", "serviceAccountName: archivist-blob", "want archivist-blob-reader"},
		{"connections beyond max_connections", "kind: Cluster", "max_connections: \"300\"", "max_connections: \"100\"", "PostgreSQL connections: the services may open"},
		{"a pool grown past the budget", "name: indexer\n", "name: DATABASE_MAX_CONNS\n          value: \"4\"", "name: DATABASE_MAX_CONNS\n          value: \"30\"", "indexer 10×31"},
		{"the migration skipping missing roles", "kind: Job", "value: \"true\"", "value: \"false\"", "MIGRATE_REQUIRE_ROLES must be true"},
		{"the migrate Job deleted by a TTL", "kind: Job", "  backoffLimit: 6\n", "  backoffLimit: 6\n  ttlSecondsAfterFinished: 300\n", "ttlSecondsAfterFinished: a GitOps tool re-creates"},
		{"the migrate Job giving up at once", "kind: Job", "value: 15m", "value: 30s", "MIGRATE_WAIT \"30s\": must be at least 5m"},
		{"the migrate Job named for every release alike", "kind: Job", "name: archivist-migrate-", "name: migrate-", "must be named archivist-migrate-"},
		{"services migrating on start", "kind: ConfigMap", "MIGRATE_ON_START: \"false\"", "MIGRATE_ON_START: \"true\"", "MIGRATE_ON_START must be false"},
		{"the ingest working area per pod", "name: curator\n", "persistentVolumeClaim:\n          claimName: archivist-ingest", "emptyDir:\n          sizeLimit: 50Gi", "must be a ReadWriteMany volume claim"},
		{"the ingest working area on a single-node claim", "name: archivist-ingest", "ReadWriteMany", "ReadWriteOnce", "must be a ReadWriteMany volume claim"},
		{"NATS without TLS", "kind: ConfigMap", "NATS_URL: tls://", "NATS_URL: nats://", "must be tls://"},
		{"the NATS server not checked", "kind: ConfigMap", "NATS_TLS_CA_FILE:", "NATS_TLS_CA_FILES:", "NATS_TLS_CA_FILE is not set"},
		{"a pod without the NATS client certificate", "name: researcher\n", "secretName: archivist-nats-client", "secretName: other", "Deployment researcher does not mount Secret archivist-nats-client"},
		{"a pod without the NATS servers' CA", "name: researcher\n", "name: nats-server-ca", "name: other", "Deployment researcher does not mount ConfigMap nats-server-ca"},
		{"the client certificate from a ClusterIssuer", "secretName: archivist-nats-client\n", "kind: Issuer", "kind: ClusterIssuer", "want the namespaced Issuer archivist-nats-client-ca"},
		{"the migrate Job without the NATS CA", "kind: Job", "mountPath: /etc/archivist/nats-tls", "mountPath: /etc/elsewhere", "does not mount Secret archivist-nats-client"},
		{"no client certificate issued", "kind: Certificate", "secretName: archivist-nats-client\n", "secretName: another\n", "no cert-manager Certificate issues Secret archivist-nats-client"},
		{"unknown field in a Certificate", "secretName: archivist-nats-client\n", "renewBefore:", "renewBeforeX:", "unknown field"},
		// The install blockers a real cluster met (#35).
		{"the shared working area on the default class", "kind: PersistentVolumeClaim", "  storageClassName: efs-sc\n", "", "ReadWriteMany without a storageClassName"},
		{"the working area without fsGroup", "name: curator\n", "        fsGroup: 65532\n", "", "without an fsGroup"},
		{"an image without a registry", "name: curator\n", "image: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/archivist/curator:0.2.0", "image: archivist/curator:v0.1.0", "names no registry"},
		{"an image without a tag", "name: auditor\n", "archivist/auditor:0.2.0", "archivist/auditor", "no fixed tag"},
		{"a PodMonitor Prometheus does not select", "kind: PodMonitor", "    release: monitoring\n", "", "PodMonitor archivist has no release label"},
		{"alerts Prometheus does not load", "kind: PrometheusRule", "    release: monitoring\n", "", "PrometheusRule archivist has no release label"},
		{"a drain that blocks in an outage", "kind: PodDisruptionBudget", "  unhealthyPodEvictionPolicy: AlwaysAllow\n", "", "unhealthyPodEvictionPolicy must be AlwaysAllow"},
		{"no preStop pause", "name: pwa\n", "        lifecycle:\n          preStop:\n            sleep:\n              seconds: 5\n", "", "no preStop pause"},
		{"a grace the preStop pause eats", "name: cwa\n", "terminationGracePeriodSeconds: 40", "terminationGracePeriodSeconds: 28", "is not longer than the preStop pause"},
		{"settings that do not roll the pods", "name: indexer\n", "        checksum/config:", "        checksum/other:", "no checksum/config annotation"},
		{"pods on one node", "name: auditor\n", "topologyKey: kubernetes.io/hostname", "topologyKey: kubernetes.io/arch", "no topology spread"},
		{"no GOMEMLIMIT", "name: aggregator\n", "name: GOMEMLIMIT", "name: GOMAXPROCS", "no GOMEMLIMIT"},
		{"GOMEMLIMIT above the limit", "name: aggregator\n", "value: 460MiB", "value: 600MiB", "must be below the memory limit"},
		{"emptyDirs the node has no room for", "name: indexer\n", "ephemeral-storage: 9Gi", "ephemeral-storage: 1Gi", "requests 1Gi of ephemeral storage"},
		{"KEDA's Deployment resetting its scale", "name: researcher\n", "spec:\n  revisionHistoryLimit: 5", "spec:\n  replicas: 2\n  revisionHistoryLimit: 5", "KEDA scales it, yet it sets replicas 2"},
		{"the password in the database URL", "name: cwa\n", "value: postgres://archivist-db-rw", "value: postgres://$(PGUSER):$(PGPASSWORD)@archivist-db-rw", "carries the credentials"},
		{"helm test as a plain Pod", "kind: Pod", "helm.sh/hook: test", "helm.sh/hook: pre-install", "not a helm test hook"},
		{"helm test skipping an API", "kind: Pod", "  - http://curator:9090/readyz\n", "", "does not check the readiness of the API curator"},
		{"helm test without a CDX query", "kind: Pod", "/cdx?url=", "/v1/index/generations?url=", "makes no CDX query"},
		{"helm test cut off from the admin ports", "name: archivist-tests", "app.kubernetes.io/name: archivist-test", "app.kubernetes.io/name: archivist-tester", "no NetworkPolicy lets helm test's pod reach the admin ports"},
		{"KEDA reading a port no Service serves", "port: 8081", "  - name: admin\n    port: 9090\n    targetPort: admin\n", "", "no Service pwa serves port 9090"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeAll(t, mutate(t, docs, c.marker, c.old, c.new))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	t.Run("no absent() alert", func(t *testing.T) {
		mutated := make([][]byte, len(docs))
		for i, d := range docs {
			mutated[i] = []byte(strings.ReplaceAll(string(d), "absent(", "max("))
		}
		if _, err := decodeAll(t, mutated); err == nil || !strings.Contains(err.Error(), "no target-down (up == 0) or absent() alert") {
			t.Errorf("error %v", err)
		}
	})
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
