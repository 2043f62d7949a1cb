package k8s

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cnpgv1 "github.com/cloudnative-pg/api/pkg/api/v1"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/archivist/archivist/events"
)

// checkSharedWorkArea: the curator's ingest working area (INGEST_WORK_DIR)
// is a ReadWriteMany volume claim when it runs more than one replica: any
// replica may take up a job whose files another downloaded.
func checkSharedWorkArea(d *appsv1.Deployment, claims map[string]*corev1.PersistentVolumeClaim, fail func(string, ...any)) {
	if d.Spec.Replicas != nil && *d.Spec.Replicas <= 1 {
		return
	}
	dir := envValue(d, "INGEST_WORK_DIR")
	var vol string
	for _, m := range container(d).VolumeMounts {
		if dir != "" && (dir == m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/")) {
			vol = m.Name
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name != vol {
			continue
		}
		if v.PersistentVolumeClaim != nil {
			if c, ok := claims[v.PersistentVolumeClaim.ClaimName]; ok && slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany) {
				return
			}
		}
	}
	fail("Deployment curator: its ingest working area (INGEST_WORK_DIR %q) must be a ReadWriteMany volume claim shared by its replicas: any replica may take up a job whose files another downloaded", dir)
}

// checkMigration: the services do not migrate (the migration role is the
// Job's alone) and so wait for their schemas; the Job fails on a missing
// runtime role, waits for PostgreSQL and NATS to answer (MIGRATE_WAIT: a
// new CloudNativePG cluster takes minutes, longer than a Job's retries
// last), and is named per release (archivist-migrate-<hash of the images'
// tag and chart version>) instead of being deleted by a TTL: a Job's pod
// template cannot change, so each release needs a Job of its own, and a
// GitOps tool re-creates, and re-runs, a Job that a TTL deleted at every
// sync.
func checkMigration(config map[string]string, jobs []*batchv1.Job, fail func(string, ...any)) {
	if config["MIGRATE_ON_START"] != "false" {
		fail("ConfigMap archivist: MIGRATE_ON_START must be false: the services' runtime roles may not change the schema")
	}
	if len(jobs) != 1 {
		fail("want one migrate Job, have %d", len(jobs))
		return
	}
	j := jobs[0]
	env := map[string]string{}
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	if env["MIGRATE_REQUIRE_ROLES"] != "true" {
		fail("Job %s: MIGRATE_REQUIRE_ROLES must be true: a missing runtime role would leave its service refused every query", j.Name)
	}
	if d, err := time.ParseDuration(env["MIGRATE_WAIT"]); err != nil || d < 5*time.Minute {
		fail("Job %s: MIGRATE_WAIT %q: must be at least 5m: a new CloudNativePG cluster takes minutes to answer, and a Job that gives up at once spends its retries", j.Name, env["MIGRATE_WAIT"])
	}
	if j.Spec.TTLSecondsAfterFinished != nil {
		fail("Job %s: ttlSecondsAfterFinished: a GitOps tool re-creates and re-runs a Job its TTL deleted at every sync; name the Job per release instead", j.Name)
	}
	if !strings.HasPrefix(j.Name, "archivist-migrate-") {
		fail("Job %s: must be named archivist-migrate-<release hash>: a Job's pod template cannot change, so each release needs its own", j.Name)
	}
}

// Connection budget: what PostgreSQL keeps for superusers
// (superuser_reserved_connections) and for the operator, CloudNativePG and
// an administrator's psql.
const (
	pgReserved = 3
	pgHeadroom = 10
)

// leaderSessions is how many loops each service leads (service.Env.AsLeader, pkg/leader):
// each holds its lock in a session of its own, beyond the pool
// (TestLeaderSessionsMatchTheCode counts them in the services' code).
var leaderSessions = map[string]int{"curator": 1, "indexer": 1, "aggregator": 1, "auditor": 5}

// checkConnectionBudget: at their most replicas (KEDA's maximum for a
// scaled Deployment), every pool of every service (DATABASE_MAX_CONNS, and
// the curator's ingest claims, INGEST_MAX_CLAIMS and 11), the leaders'
// sessions (leaderSessions) and the migrate Job fit in the Cluster's
// max_connections, less what is reserved.
func checkConnectionBudget(cluster *cnpgv1.Cluster, config map[string]string, deployments map[string]*appsv1.Deployment, scaledMax map[string]int32, jobs int, fail func(string, ...any)) {
	limit := 100 // PostgreSQL's default
	if v, ok := cluster.Spec.PostgresConfiguration.Parameters["max_connections"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			fail("Cluster %s: max_connections %q: %v", cluster.Name, v, err)
			return
		}
		limit = n
	}
	setting := func(d *appsv1.Deployment, name string, def int) int {
		v := config[name]
		if hasEnv(d, name) {
			v = envValue(d, name)
		}
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			fail("Deployment %s: %s %q: %v", d.Name, name, v, err)
		}
		return n
	}
	total := jobs * setting(&appsv1.Deployment{}, "DATABASE_MAX_CONNS", 10)
	var parts []string
	names := slices.Sorted(maps.Keys(deployments))
	for _, name := range names {
		d := deployments[name]
		if !hasEnv(d, "DATABASE_URL") {
			continue
		}
		per := setting(d, "DATABASE_MAX_CONNS", 10) + leaderSessions[name]
		if name == "curator" {
			// The shared claim slots, and one of each of the 11 ingest
			// states' own.
			per += setting(d, "INGEST_MAX_CLAIMS", 16) + 11
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		if m, ok := scaledMax[name]; ok {
			replicas = m
		}
		total += int(replicas) * per
		parts = append(parts, fmt.Sprintf("%s %d×%d", name, replicas, per))
	}
	if budget := limit - pgReserved - pgHeadroom; total > budget {
		fail("PostgreSQL connections: the services may open %d (%s, migrate %d) at their most replicas, beyond the %d that max_connections %d leaves: raise it in the Cluster or lower DATABASE_MAX_CONNS",
			total, strings.Join(parts, ", "), jobs*setting(&appsv1.Deployment{}, "DATABASE_MAX_CONNS", 10), budget, limit)
	}
}

// blobServices are the services that read and write the blob store.
var blobServices = []string{"curator", "researcher", "indexer", "aggregator", "auditor"}

// blobReaders are the blob services that only read it: they run as the
// read-only identity, with the reader's static keys.
var blobReaders = map[string]bool{"researcher": true}

// The blob store's identities and their static keys' Secrets.
const (
	blobWriterAccount = "archivist-blob"
	blobReaderAccount = "archivist-blob-reader"
	blobWriterSecret  = "archivist-s3"
	blobReaderSecret  = "archivist-s3-reader"
)

// checkBlobAccess: BLOB_URL names a real bucket and endpoint (not a
// placeholder), and every service using the store runs as its identity
// (the writer's, or the reader's for those that only read) with
// credentials of one of the kinds the S3 client takes: static keys from the
// identity's Secret, a web identity (AWS_ROLE_ARN with a projected token
// file), IRSA (the ServiceAccount's role annotation), or EKS Pod Identity
// (an association made outside the manifests, which the ServiceAccount
// declares with the annotation archivist.io/blob-credentials: pod-identity).
func checkBlobAccess(config map[string]string, accounts map[string]*corev1.ServiceAccount, deployments map[string]*appsv1.Deployment, fail func(string, ...any)) {
	u, err := url.Parse(config["BLOB_URL"])
	switch {
	case err != nil || u.Scheme != "s3" || u.Host == "":
		fail("ConfigMap archivist: BLOB_URL %q is not an s3://bucket/ URL", config["BLOB_URL"])
	case u.Query().Get("endpoint") == "" || strings.Contains(u.Query().Get("endpoint"), "example"):
		fail("ConfigMap archivist: BLOB_URL %q: endpoint %q is a placeholder", config["BLOB_URL"], u.Query().Get("endpoint"))
	}
	for _, svc := range blobServices {
		d, ok := deployments[svc]
		if !ok {
			continue
		}
		name := d.Spec.Template.Spec.ServiceAccountName
		sa := accounts[name]
		if sa == nil {
			fail("Deployment %s uses the blob store but runs as no ServiceAccount of the manifests (%q): no identity to take credentials from", svc, name)
			continue
		}
		account, secret := blobWriterAccount, blobWriterSecret
		if blobReaders[svc] {
			account, secret = blobReaderAccount, blobReaderSecret
		}
		if name != account {
			fail("Deployment %s runs as %s, want %s: a service that only reads the blob store runs as the read-only identity, and only those that write as the writer", svc, name, account)
		}
		static := envSecret(d, "S3_ACCESS_KEY_ID") != "" || envSecret(d, "S3_SECRET_ACCESS_KEY") != ""
		web := envValue(d, "AWS_ROLE_ARN") != "" && envValue(d, "AWS_WEB_IDENTITY_TOKEN_FILE") != ""
		irsa := sa.Annotations["eks.amazonaws.com/role-arn"] != ""
		podIdentity := sa.Annotations["archivist.io/blob-credentials"] == "pod-identity"
		switch {
		case static && (envSecret(d, "S3_ACCESS_KEY_ID") != secret || envSecret(d, "S3_SECRET_ACCESS_KEY") != secret):
			fail("Deployment %s: S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must both come from the Secret %s (its identity's keys)", svc, secret)
		case web && !projectsToken(d, envValue(d, "AWS_WEB_IDENTITY_TOKEN_FILE")):
			fail("Deployment %s: AWS_WEB_IDENTITY_TOKEN_FILE %q is not a projected ServiceAccount token of the pod", svc, envValue(d, "AWS_WEB_IDENTITY_TOKEN_FILE"))
		case !static && !web && !irsa && !podIdentity:
			fail("Deployment %s uses the blob store with no credentials: static keys (Secret %s), a web identity, IRSA or Pod Identity (blob.credentials)", svc, secret)
		}
	}
}

// projectsToken reports whether the pod mounts a projected ServiceAccount
// token at file.
func projectsToken(d *appsv1.Deployment, file string) bool {
	for _, m := range container(d).VolumeMounts {
		if !strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil }) {
				return true
			}
		}
	}
	return false
}

// checkAPIServices: every service with an HTTP API listens on a port named
// http (its *_HTTP_ADDR), and a Service selects its pods on that port, so
// that clients (a Wayback, the CLI, a dashboard) reach it by name.
func checkAPIServices(services []*corev1.Service, deployments map[string]*appsv1.Deployment, fail func(string, ...any)) {
	for _, svc := range apiServices {
		d, ok := deployments[svc]
		if !ok {
			continue
		}
		addr := envValue(d, strings.ToUpper(svc)+"_HTTP_ADDR")
		port := int32(0)
		for _, p := range container(d).Ports {
			if p.Name == "http" {
				port = p.ContainerPort
			}
		}
		if port == 0 || !strings.HasSuffix(addr, fmt.Sprintf(":%d", port)) {
			fail("Deployment %s: its API must listen (%s_HTTP_ADDR %q) on its container port named http (%d)", svc, strings.ToUpper(svc), addr, port)
		}
		if !slices.ContainsFunc(services, func(s *corev1.Service) bool {
			return s.Spec.Selector["app.kubernetes.io/name"] == svc && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.TargetPort.StrVal == "http" || p.TargetPort.IntVal == port
			})
		}) {
			fail("no Service exposes the API of %s (its pods' http port)", svc)
		}
	}
}

// checkWritablePaths: on a read-only root filesystem every path a
// service writes is a volume: /tmp (os.TempDir: the aggregator's merge),
// TMPDIR, and every *_DIR variable (the ingest and indexer working areas).
func checkWritablePaths(what string, spec corev1.PodSpec, fail func(string, ...any)) {
	for _, c := range spec.Containers {
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			fail("%s container %s: the root filesystem must be read-only", what, c.Name)
			continue
		}
		paths := []string{"/tmp"}
		for _, e := range c.Env {
			if (e.Name == "TMPDIR" || strings.HasSuffix(e.Name, "_DIR")) && strings.HasPrefix(e.Value, "/") {
				paths = append(paths, e.Value)
			}
		}
		for _, p := range paths {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return !m.ReadOnly && (p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/"))
			}) {
				fail("%s container %s writes %s, which is on the read-only root filesystem: mount a volume there", what, c.Name, p)
			}
		}
	}
}

// apiServices are the services with an HTTP API: their pods mount the API
// keys and take connections only from API clients.
var apiServices = []string{"curator", "pwa", "auditor", "indexer", "aggregator", "dashboard"}

// APIClientLabel marks the pods the APIs take connections from.
const APIClientLabel = "archivist.io/api-client"

// Deployed are the services a Deployment runs: every service with a NATS
// user of its own, and the dashboard (which looks as the user dashboard).
func Deployed() []string { return append(slices.Clone(events.Services), "dashboard") }

// checkNetworkPolicies: ingress is denied by default; each API takes
// connections on its http port only from pods labelled as API clients; the
// admin port only from the monitoring namespace; every API pod mounts the
// API keys.
func checkNetworkPolicies(policies []*networkingv1.NetworkPolicy, deployments map[string]*appsv1.Deployment, fail func(string, ...any)) {
	denyAll, denyEgress := false, false
	egressPorts := map[int32]bool{}
	apiAllowed := map[string]bool{}
	for _, p := range policies {
		if slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			if len(p.Spec.Egress) == 0 && selectsArchivist(p.Spec.PodSelector) {
				denyEgress = true
			}
			for _, r := range p.Spec.Egress {
				if len(r.Ports) == 0 {
					fail("NetworkPolicy %s lets its pods out on every port (an egress rule without ports)", p.Name)
				}
				for _, port := range r.Ports {
					if port.Port != nil {
						egressPorts[port.Port.IntVal] = true
					}
				}
			}
		}
		ingress := slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		if ingress && len(p.Spec.PodSelector.MatchLabels) == 0 && len(p.Spec.PodSelector.MatchExpressions) == 0 && len(p.Spec.Ingress) == 0 {
			denyAll = true
		}
		for _, r := range p.Spec.Ingress {
			for _, f := range r.From {
				if f.PodSelector == nil && f.NamespaceSelector != nil && len(f.NamespaceSelector.MatchLabels) == 0 && len(f.NamespaceSelector.MatchExpressions) == 0 {
					fail("NetworkPolicy %s lets every pod of every namespace in", p.Name)
				}
			}
			if len(r.From) == 0 {
				fail("NetworkPolicy %s lets anyone in (an ingress rule without from)", p.Name)
			}
		}
		for _, e := range p.Spec.PodSelector.MatchExpressions {
			if e.Key == "app.kubernetes.io/name" && e.Operator == "In" {
				for _, v := range e.Values {
					apiAllowed[v] = true
				}
			}
		}
	}
	if !denyAll {
		fail("no default-deny NetworkPolicy (podSelector {}, Ingress, no rules)")
	}
	if !denyEgress {
		fail("no default-deny-egress NetworkPolicy (Archivist's pods, Egress, no rules): a compromised service could reach anything")
	}
	for port, what := range map[int32]string{53: "DNS", 4222: "NATS", 5432: "PostgreSQL"} {
		if !egressPorts[port] {
			fail("no egress NetworkPolicy lets Archivist's pods reach %s (port %d)", what, port)
		}
	}
	for _, svc := range apiServices {
		if !apiAllowed[svc] {
			fail("no NetworkPolicy lets API clients reach %s", svc)
		}
		if d, ok := deployments[svc]; ok && !mountsAPIKeys(d) {
			fail("Deployment %s does not mount the API keys (Secret archivist-api-keys)", svc)
		}
		// Keys cross the cluster's network to every API (the dashboard
		// forwards each person's): TLS only.
		if d, ok := deployments[svc]; ok && (envValue(d, "API_TLS_CERT_FILE") == "" || envValue(d, "API_TLS_KEY_FILE") == "") {
			fail("Deployment %s serves its API without TLS (API_TLS_CERT_FILE, API_TLS_KEY_FILE): keys would cross the network in clear", svc)
		}
	}
	if d, ok := deployments["dashboard"]; ok {
		for _, v := range []string{"DASHBOARD_CURATOR_URL", "DASHBOARD_PWA_URL", "DASHBOARD_AUDITOR_URL", "DASHBOARD_INDEXER_URL", "DASHBOARD_AGGREGATOR_URL"} {
			if u := envValue(d, v); !strings.HasPrefix(u, "https://") {
				fail("Deployment dashboard: %s %q is not https: it forwards each person's key to that API", v, u)
			}
		}
	}
	// The dashboard asks every API: its pods must be API clients.
	if d, ok := deployments["dashboard"]; ok && d.Spec.Template.Labels[APIClientLabel] != "true" {
		fail("Deployment dashboard: its pods lack the label %s=true, so the NetworkPolicies keep it from the APIs it reads", APIClientLabel)
	}
}

// selectsArchivist reports whether a policy's pod selector takes
// Archivist's pods (labelled app.kubernetes.io/part-of=archivist).
func selectsArchivist(sel metav1.LabelSelector) bool {
	if sel.MatchLabels["app.kubernetes.io/part-of"] == "archivist" {
		return true
	}
	for _, e := range sel.MatchExpressions {
		if e.Key == "app.kubernetes.io/part-of" && e.Operator == metav1.LabelSelectorOpIn && slices.Contains(e.Values, "archivist") {
			return true
		}
	}
	return len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
}

// NATSClientSecret is the Secret of the NATS clients' certificate
// (charts/archivist/templates/nats-tls.yaml), mounted in every pod.
const NATSClientSecret = "archivist-nats-client"

// NATSServerCAConfigMap is the ConfigMap of the NATS servers' CA
// certificate in a client namespace (scripts/nats-trust copies it), which
// every pod mounts where NATS_TLS_CA_FILE points.
const NATSServerCAConfigMap = "nats-server-ca"

// NATSClientIssuer is the namespaced Issuer of Archivist's NATS clients'
// certificate: a CA of the namespace alone.
const NATSClientIssuer = "archivist-nats-client-ca"

// checkNATSClients: NATS is reached over TLS only (a tls:// URL), the
// server checked against the NATS servers' CA, mounted from the ConfigMap
// nats-server-ca where NATS_TLS_CA_FILE points; every pod presents the
// client certificate of the Secret archivist-nats-client, which
// cert-manager issues from a namespaced CA Issuer (a ClusterIssuer would
// sign for any namespace).
func checkNATSClients(config map[string]string, certs []*cmv1.Certificate, issuers []*cmv1.Issuer, pods map[string]corev1.PodSpec, fail func(string, ...any)) {
	for _, u := range strings.Split(config["NATS_URL"], ",") {
		if !strings.HasPrefix(strings.TrimSpace(u), "tls://") {
			fail("ConfigMap archivist: NATS_URL %q must be tls:// (NATS without TLS)", u)
		}
	}
	ca := config["NATS_TLS_CA_FILE"]
	if ca == "" {
		fail("ConfigMap archivist: NATS_TLS_CA_FILE is not set: the NATS server's certificate is not checked against its CA")
	}
	if err := namespacedCA(NATSClientIssuer, NATSClientSecret, certs, issuers); err != nil {
		fail("%v", err)
	}
	for _, c := range certs {
		if c.Spec.IssuerRef.Kind == "ClusterIssuer" {
			fail("Certificate %s is issued by the ClusterIssuer %s: any namespace could have a certificate of it; use a namespaced Issuer", c.Name, c.Spec.IssuerRef.Name)
		}
	}
	for name, spec := range pods {
		secretVols, caVols := map[string]bool{}, map[string]bool{}
		for _, v := range spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == NATSClientSecret {
				secretVols[v.Name] = true
			}
			if v.ConfigMap != nil && v.ConfigMap.Name == NATSServerCAConfigMap {
				caVols[v.Name] = true
			}
		}
		certMounted, caMounted := false, false
		for _, c := range spec.Containers {
			for _, m := range c.VolumeMounts {
				within := func(file string) bool {
					return file != "" && strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
				}
				if secretVols[m.Name] && within(config["NATS_TLS_CERT_FILE"]) && within(config["NATS_TLS_KEY_FILE"]) {
					certMounted = true
				}
				if caVols[m.Name] && within(ca) {
					caMounted = true
				}
			}
		}
		if !certMounted {
			fail("%s does not mount Secret %s where NATS_TLS_CERT_FILE and NATS_TLS_KEY_FILE are", name, NATSClientSecret)
		}
		if !caMounted {
			fail("%s does not mount ConfigMap %s where NATS_TLS_CA_FILE %s is", name, NATSServerCAConfigMap, ca)
		}
	}
}

// namespacedCA is nil when a Certificate issues Secret secret (client or
// server auth) from the namespaced Issuer issuer, which signs with the
// Secret of a CA Certificate of the same objects.
func namespacedCA(issuer, secret string, certs []*cmv1.Certificate, issuers []*cmv1.Issuer) error {
	var leaf *cmv1.Certificate
	caSecrets := map[string]bool{}
	for _, c := range certs {
		if c.Spec.SecretName == secret {
			leaf = c
		}
		if c.Spec.IsCA {
			caSecrets[c.Spec.SecretName] = true
		}
	}
	if leaf == nil {
		return fmt.Errorf("no cert-manager Certificate issues Secret %s", secret)
	}
	if leaf.Spec.IssuerRef.Kind != "Issuer" || leaf.Spec.IssuerRef.Name != issuer {
		return fmt.Errorf("Certificate %s is issued by %s %s, want the namespaced Issuer %s", leaf.Name, leaf.Spec.IssuerRef.Kind, leaf.Spec.IssuerRef.Name, issuer)
	}
	for _, is := range issuers {
		if is.Name == issuer {
			if is.Spec.CA == nil || !caSecrets[is.Spec.CA.SecretName] {
				return fmt.Errorf("Issuer %s does not sign with a CA Certificate's Secret", issuer)
			}
			return nil
		}
	}
	return fmt.Errorf("no Issuer %s in the namespace", issuer)
}

func mountsAPIKeys(d *appsv1.Deployment) bool {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "archivist-api-keys" {
			return true
		}
	}
	return false
}

// NATSMonitorEndpoint is where KEDA's nats-jetstream scaler reads consumer
// lag: the monitoring port of the NATS chart's headless Service (release
// nats, in namespace ns). The chart's ClusterIP Service does not carry
// 8222, and in a cluster the scaler asks each consumer's leader at
// <server name>.<endpoint>, which only the headless Service resolves.
func NATSMonitorEndpoint(ns string) string {
	return "nats-headless." + ns + ".svc.cluster.local:8222"
}

// natsNamespace is the namespace of the NATS servers NATS_URL names
// (tls://nats.<ns>.svc...), "nats" if it names none.
func natsNamespace(natsURL string) string {
	if u, err := url.Parse(strings.Split(natsURL, ",")[0]); err == nil {
		if parts := strings.Split(u.Hostname(), "."); len(parts) > 2 && parts[2] == "svc" {
			return parts[1]
		}
	}
	return "nats"
}

func checkScaledObject(s *kedav1alpha1.ScaledObject, natsNS string, fail func(string, ...any)) {
	for _, tr := range s.Spec.Triggers {
		switch tr.Type {
		case "nats-jetstream":
			stream, consumer := tr.Metadata["stream"], tr.Metadata["consumer"]
			if !consumerExists(stream, consumer) {
				fail("ScaledObject %s scales on %s/%s, which is no Archivist consumer", s.Name, stream, consumer)
			}
			if tr.Metadata["lagThreshold"] == "" {
				fail("ScaledObject %s: lagThreshold is required", s.Name)
			}
			if ep := tr.Metadata["natsServerMonitoringEndpoint"]; ep != NATSMonitorEndpoint(natsNS) {
				fail("ScaledObject %s: natsServerMonitoringEndpoint %q does not resolve in the NATS chart's naming: want %s (the headless Service's monitoring port)", s.Name, ep, NATSMonitorEndpoint(natsNS))
			}
			if stream == events.StreamResearchWork {
				fail("ScaledObject %s scales on the research work queue, which the pwa keeps short: scale on %s", s.Name, events.MetricOpenResearch)
			}
		case "metrics-api":
			ns := s.Namespace
			if ns == "" {
				ns = "archivist"
			}
			want := "http://pwa." + ns + ".svc.cluster.local:9090/metrics"
			if tr.Metadata["url"] != want || tr.Metadata["format"] != "prometheus" || tr.Metadata["valueLocation"] != events.MetricOpenResearch || tr.Metadata["targetValue"] == "" {
				fail("ScaledObject %s: the metrics-api trigger must read %s (format prometheus, valueLocation %s, a targetValue)", s.Name, want, events.MetricOpenResearch)
			}
		default:
			fail("ScaledObject %s: trigger %s: only nats-jetstream and the pwa's metrics-api are used", s.Name, tr.Type)
		}
	}
}

func consumerExists(stream, durable string) bool {
	for _, c := range []events.Consumer{events.Researchers, events.Indexers, events.CWAResults, events.PWAWorks,
		events.CuratorEpisodes, events.CuratorClips, events.CuratorMerger} {
		if c.Stream == stream && c.Config.Durable == durable {
			return true
		}
	}
	return false
}

func container(d *appsv1.Deployment) *corev1.Container {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return &corev1.Container{}
	}
	return &d.Spec.Template.Spec.Containers[0]
}

func hasEnv(d *appsv1.Deployment, name string) bool {
	return slices.ContainsFunc(container(d).Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

func envValue(d *appsv1.Deployment, name string) string {
	for _, e := range container(d).Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// envSecret is the Secret the variable name of d's container comes from
// ("" when none).
func envSecret(d *appsv1.Deployment, name string) string {
	for _, e := range container(d).Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name
		}
	}
	return ""
}

func envFromSecret(d *appsv1.Deployment, name string) bool {
	for _, e := range container(d).Env {
		if e.Name == name {
			return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != ""
		}
	}
	return false
}

// needsCredentials are the settings that need credentials of the service
// that reads them: set, the service refuses to start without them.
var needsCredentials = []struct{ service, setting, user, password string }{
	{"curator", "INGEST_EZID_URL", "INGEST_EZID_USER", "INGEST_EZID_PASSWORD"},
	{"curator", "INGEST_SMTP_USER", "", "INGEST_SMTP_PASSWORD"},
}

// checkCredentials: a setting that needs credentials (EZID's URL, an SMTP
// user) has them reach its service: a user from the configuration or the
// environment, and a password from a Secret that is not optional (an
// optional one left unset starts a service that then refuses to run).
func checkCredentials(config map[string]string, deployments map[string]*appsv1.Deployment, fail func(string, ...any)) {
	for _, n := range needsCredentials {
		d := deployments[n.service]
		if config[n.setting] == "" || d == nil {
			continue
		}
		if n.user != "" && config[n.user] == "" && !hasEnv(d, n.user) {
			fail("%s is set but the %s has no %s (config, or services.%s.secretEnv): it refuses to start", n.setting, n.service, n.user, n.service)
		}
		ok := false
		for _, e := range container(d).Env {
			if e.Name == n.password && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ok = e.ValueFrom.SecretKeyRef.Optional == nil || !*e.ValueFrom.SecretKeyRef.Optional
			}
		}
		if !ok {
			fail("%s is set but the %s's %s is not from a Secret it must have (services.%s.secretEnv without optional): it refuses to start", n.setting, n.service, n.password, n.service)
		}
	}
}

// checkTests: helm test's pods are test hooks (a plain Pod would run at
// every install and stay), hardened as the services' pods, and probe the
// readiness of every API the chart serves and a CDX query; with policies
// on, a policy lets the test pod reach the admin ports.
func checkTests(pods []*corev1.Pod, services []*corev1.Service, policies []*networkingv1.NetworkPolicy, fail func(string, ...any)) {
	if len(pods) == 0 {
		fail("no helm test: a Pod annotated helm.sh/hook: test that checks each API's readiness and a CDX query")
		return
	}
	var args []string
	for _, p := range pods {
		if p.Annotations["helm.sh/hook"] != "test" {
			fail("Pod %s is not a helm test hook (helm.sh/hook: test): it would run at every install", p.Name)
		}
		if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
			fail("Pod %s: restartPolicy %q, a test runs once (Never)", p.Name, p.Spec.RestartPolicy)
		}
		for _, c := range p.Spec.Containers {
			checkImage("Pod "+p.Name, c.Image, fail)
			args = append(args, c.Args...)
		}
		checkWritablePaths("Pod "+p.Name, p.Spec, fail)
	}
	probes := strings.Join(args, " ")
	for _, svc := range services {
		for _, port := range svc.Spec.Ports {
			if port.Name == "http" && !strings.Contains(probes, "http://"+svc.Name+":9090/readyz") {
				fail("helm test does not check the readiness of the API %s (http://%s:9090/readyz)", svc.Name, svc.Name)
			}
		}
	}
	if !strings.Contains(probes, "/cdx?") {
		fail("helm test makes no CDX query")
	}
	if len(policies) == 0 {
		return
	}
	for _, pol := range policies {
		for _, r := range pol.Spec.Ingress {
			for _, f := range r.From {
				if f.PodSelector != nil && f.PodSelector.MatchLabels["app.kubernetes.io/name"] == "archivist-test" && opensPort(r, 9090) {
					return
				}
			}
		}
	}
	fail("no NetworkPolicy lets helm test's pod reach the admin ports: its readiness checks would time out")
}

// readFile is os.ReadFile, for the checks of single files.
var readFile = os.ReadFile
