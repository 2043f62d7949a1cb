package k8s

import (
	"errors"
	"fmt"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/archivist/archivist/events"
)

// ChartTLS is a tls block of the NATS Helm chart's values.
type ChartTLS struct {
	Enabled    bool           `json:"enabled"`
	SecretName string         `json:"secretName"`
	Merge      map[string]any `json:"merge,omitempty"`
}

// NATSValues is the part of the NATS Helm chart's values Archivist sets.
type NATSValues struct {
	Enabled          bool   `json:"enabled"`
	FullnameOverride string `json:"fullnameOverride"`
	TLSCA            struct {
		Enabled       bool   `json:"enabled"`
		SecretName    string `json:"secretName"`
		ConfigMapName string `json:"configMapName"`
		Key           string `json:"key"`
	} `json:"tlsCA"`
	Config struct {
		NATS struct {
			TLS ChartTLS `json:"tls"`
		} `json:"nats"`
		Cluster struct {
			Enabled  bool     `json:"enabled"`
			Replicas int      `json:"replicas"`
			TLS      ChartTLS `json:"tls"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				Enabled bool   `json:"enabled"`
				Dir     string `json:"dir"`
				PVC     struct {
					Enabled          bool   `json:"enabled"`
					Size             string `json:"size"`
					StorageClassName string `json:"storageClassName,omitempty"`
				} `json:"pvc"`
			} `json:"fileStore"`
			Merge map[string]any `json:"merge"`
		} `json:"jetstream"`
		Monitor struct {
			Enabled bool `json:"enabled"`
			Port    int  `json:"port"`
		} `json:"monitor"`
		Merge map[string]any `json:"merge"`
	} `json:"config"`
	NATSBox struct {
		Enabled bool `json:"enabled"`
	} `json:"natsBox"`
	Container struct {
		Image struct {
			Repository string `json:"repository,omitempty"`
			Tag        string `json:"tag"`
		} `json:"image"`
		Env   map[string]any   `json:"env"`
		Patch []map[string]any `json:"patch"`
		Merge struct {
			SecurityContext *corev1.SecurityContext `json:"securityContext"`
		} `json:"merge"`
	} `json:"container"`
	Reloader struct {
		Merge struct {
			SecurityContext *corev1.SecurityContext `json:"securityContext"`
		} `json:"merge"`
	} `json:"reloader"`
	PodTemplate struct {
		Patch []map[string]any `json:"patch"`
		Merge struct {
			Spec struct {
				SecurityContext *corev1.PodSecurityContext `json:"securityContext"`
			} `json:"spec"`
		} `json:"merge"`
	} `json:"podTemplate"`
	PromExporter struct {
		Enabled    bool `json:"enabled"`
		PodMonitor struct {
			Enabled bool `json:"enabled"`
			Merge   struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"merge"`
		} `json:"podMonitor"`
	} `json:"promExporter"`
}

// NATSServerSecret is the Secret of the NATS servers' certificate
// (charts/archivist-nats/templates/tls.yaml), which the NATS chart's tls
// blocks mount.
const NATSServerSecret = "nats-server-tls"

// NATSClientCAs is the ConfigMap of the nats namespace holding the CA
// certificates of every namespace whose clients NATS admits
// (scripts/nats-trust collects them).
const NATSClientCAs = "nats-client-cas"

// CheckNATSValues checks the values Archivist's NATS side passes to the
// official NATS chart: JetStream on a PVC, three or more servers or a
// single one, fsync always, monitoring, the users file included, a
// password variable for every service's user, and TLS for clients and
// routes with cert-manager's certificate.
func CheckNATSValues(v NATSValues) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("nats: "+format, a...)) }
	c := v.Config
	if c.Cluster.Enabled && (c.Cluster.Replicas < 3 || c.Cluster.Replicas%2 == 0) {
		fail("config.cluster.replicas is %d: a cluster needs an odd number of at least 3 (JetStream's quorum), or turn clustering off for a single server", c.Cluster.Replicas)
	}
	if !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled || c.JetStream.FileStore.PVC.Size == "" {
		fail("JetStream must be on file storage with a PVC")
	}
	if c.JetStream.Merge["sync_interval"] != "always" {
		fail("config.jetstream.merge.sync_interval must be always")
	}
	if v.Container.Image.Tag == "" || strings.HasPrefix(v.Container.Image.Tag, "latest") {
		fail("container.image.tag must pin the NATS server's version (the one the tests embed), not float")
	}
	if !v.PromExporter.Enabled {
		fail("promExporter must be enabled: without it JetStream's storage and consumers go unwatched")
	}
	if !c.Monitor.Enabled || c.Monitor.Port != 8222 {
		fail("monitoring must be on port 8222 (KEDA reads consumer lag there)")
	}
	if t := c.NATS.TLS; !t.Enabled || t.SecretName != NATSServerSecret {
		fail("config.nats.tls must be enabled with secretName %s: clients speak TLS", NATSServerSecret)
	}
	if v, _ := c.NATS.TLS.Merge["verify"].(bool); !v {
		fail("config.nats.tls.merge.verify must be true: every client presents a certificate of the CA (mutual TLS)")
	}
	if t := c.Cluster.TLS; c.Cluster.Enabled && (!t.Enabled || t.SecretName != NATSServerSecret) {
		fail("config.cluster.tls must be enabled with secretName %s: routes speak TLS", NATSServerSecret)
	}
	if !v.TLSCA.Enabled || v.TLSCA.ConfigMapName != NATSClientCAs || v.TLSCA.Key != "ca.crt" {
		fail("tlsCA must be enabled from the ConfigMap %s (key ca.crt): the servers check clients against their namespaces' CAs", NATSClientCAs)
	}
	if f, _ := c.Cluster.TLS.Merge["ca_file"].(string); c.Cluster.Enabled && !strings.HasSuffix(f, "/ca.crt") {
		fail("config.cluster.tls.merge.ca_file must be the servers' own ca.crt: routes check each other against the servers' CA")
	}
	if inc, _ := c.Merge["$include"].(string); !strings.HasSuffix(inc, "auth.conf") {
		fail("config.merge must $include the users file auth.conf")
	}
	if p := v.PodTemplate.Merge.Spec.SecurityContext; p == nil || p.RunAsNonRoot == nil || !*p.RunAsNonRoot || p.SeccompProfile == nil {
		fail("podTemplate.merge.spec.securityContext must run the servers as a user (runAsNonRoot) with the RuntimeDefault seccomp profile")
	}
	for name, sc := range map[string]*corev1.SecurityContext{"container": v.Container.Merge.SecurityContext, "reloader": v.Reloader.Merge.SecurityContext} {
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			fail("%s.merge.securityContext must forbid privilege escalation, drop ALL capabilities and mount the root read-only", name)
		}
	}
	for _, svc := range events.Users() {
		if _, ok := v.Container.Env["NATS_PASSWORD_"+strings.ToUpper(svc)]; !ok {
			fail("no password variable for the NATS user %s", svc)
		}
	}
	return errors.Join(errs...)
}

// CheckCompose checks compose.yaml: NATS with JetStream on a volume, fsync
// always, monitoring and a JetStream health check; PostgreSQL with a
// pg_isready check; a one-shot migrate; every service waiting on all three
// and sharing the blob volume.
func CheckCompose(path string) error {
	b, err := readFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Services map[string]map[string]any `json:"services"`
		Configs  map[string]map[string]any `json:"configs"`
		Volumes  map[string]any            `json:"volumes"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(path+": "+format, a...)) }
	text := func(v any) string { j, _ := yaml.Marshal(v); return string(j) }
	nats := doc.Services["nats"]
	switch {
	case nats == nil:
		fail("no nats service")
	case !regexp.MustCompile(`^(\$\{NATS_IMAGE:-)?nats:2[^}]*\}?$`).MatchString(fmt.Sprint(nats["image"])):
		fail("nats: image %v, want nats:2-alpine (or ${NATS_IMAGE:-nats:2-alpine})", nats["image"])
	case !strings.Contains(text(nats["healthcheck"]), "/healthz?js-enabled-only=true"):
		fail("nats: health check must ask /healthz?js-enabled-only=true")
	case nats["ports"] != nil:
		fail("nats: its ports must not be published (only the services reach it)")
	case !strings.Contains(text(nats["command"]), "-js") || nats["volumes"] == nil:
		fail("nats: JetStream must be on, on a volume")
	}
	natsConf := ""
	for _, v := range asList(nats["volumes"]) {
		if f, target, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(f, "./") && strings.HasPrefix(target, "/etc/nats/") {
			if b, err := readFile(filepath.Join(filepath.Dir(path), f)); err == nil {
				natsConf = string(b)
			}
		}
	}
	if !strings.Contains(natsConf, "sync_interval: always") {
		fail("nats: its config file (mounted under /etc/nats/) must set jetstream sync_interval: always")
	}
	if pg := doc.Services["postgres"]; pg == nil || !strings.Contains(text(pg["healthcheck"]), "pg_isready") {
		fail("postgres: needs a pg_isready health check")
	} else if pg["ports"] != nil {
		fail("postgres: its port must not be published")
	}
	for name, s := range doc.Services {
		for _, p := range asList(s["ports"]) {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				fail("service %s publishes %s beyond this machine (bind it to 127.0.0.1)", name, p)
			}
		}
	}
	if m := doc.Services["migrate"]; m == nil || !strings.Contains(text(m["command"]), "migrate") {
		fail("migrate: a one-shot service running `archivist migrate` is required")
	}
	for _, svc := range events.Services {
		s := doc.Services[svc]
		if s == nil {
			fail("service %s is missing", svc)
			continue
		}
		deps, _ := s["depends_on"].(map[string]any)
		for dep, cond := range map[string]string{"nats": "service_healthy", "postgres": "service_healthy", "migrate": "service_completed_successfully",
			"keys": "service_completed_successfully", "buckets": "service_completed_successfully"} {
			d, _ := deps[dep].(map[string]any)
			if d == nil || d["condition"] != cond {
				fail("service %s must depend on %s with condition %s", svc, dep, cond)
			}
		}
		env, _ := s["environment"].(map[string]any)
		if u := fmt.Sprint(env["BLOB_URL"]); !strings.HasPrefix(u, "s3://archive/") || !strings.Contains(u, "endpoint=minio:9000") {
			fail("service %s: BLOB_URL %q, want the archive's bucket on the minio service (s3://archive/?endpoint=minio:9000...)", svc, u)
		}
	}
	// The archive in MinIO, a real S3 server, on a volume, with a health
	// check; its buckets made at the first start.
	if m := doc.Services["minio"]; m == nil || !strings.Contains(text(m["healthcheck"]), "/minio/health/ready") || m["volumes"] == nil {
		fail("minio: the archive's S3 server, on a volume, with a /minio/health/ready health check, is required")
	} else if m["ports"] != nil {
		fail("minio: its ports must not be published (only the services reach it)")
	}
	if k := doc.Services["buckets"]; k == nil || !strings.Contains(text(k["command"]), "bucket") {
		fail("buckets: a one-shot service running `archivist blob bucket` for the archive's buckets is required")
	}
	// The API keys are made at the first start, into a volume: a key in
	// the repository is a key everyone who cloned it holds.
	if k := doc.Services["keys"]; k == nil || !strings.Contains(text(k["command"]), "init") {
		fail("keys: a one-shot service running `archivist key init` is required (the system's own key, made at its first start)")
	}
	// And the operator's key itself lives apart from the keys file every
	// service mounts: a service taken over by a hostile file reads hashes,
	// not the key (N34).
	if k := doc.Services["keys"]; k != nil {
		if args := asList(k["command"]); len(args) < 4 || pathpkg.Clean(args[3]) == pathpkg.Clean(args[2]) {
			fail("keys: `archivist key init KEYS_DIR TOKEN_DIR` must put the operator's key in a directory of its own, not beside the keys file every service mounts")
		}
	}
	for name, s := range doc.Services {
		for _, v := range asList(s["volumes"]) {
			if f, target, _ := strings.Cut(v, ":"); strings.HasPrefix(f, "./") && strings.HasPrefix(target, "/etc/archivist") {
				fail("service %s mounts %s from the repository: API keys are made at the first start, never committed", name, f)
			}
		}
	}
	return errors.Join(errs...)
}

// CheckDockerfile checks that the image runs as the non-root user 65532
// and that every directory compose mounts a named volume on (/blobs) is
// made in the image owned by that user: a new named volume takes the
// ownership of the directory it is mounted on, and a root-owned one
// leaves every service failing to write.
func CheckDockerfile(dockerfile, compose string) error {
	b, err := readFile(dockerfile)
	if err != nil {
		return err
	}
	text := string(b)
	var errs []error
	if !strings.Contains(text, "USER nonroot:nonroot") && !strings.Contains(text, "USER 65532") {
		errs = append(errs, fmt.Errorf("%s: the image must run as the non-root user 65532", dockerfile))
	}
	errs = append(errs, checkModuleLayer(dockerfile, text, filepath.Dir(compose))...)
	c, err := readFile(compose)
	if err != nil {
		return err
	}
	var doc struct {
		Services map[string]map[string]any `json:"services"`
		Volumes  map[string]any            `json:"volumes"`
	}
	if err := yaml.Unmarshal(c, &doc); err != nil {
		return fmt.Errorf("%s: %w", compose, err)
	}
	for _, s := range doc.Services {
		if s["build"] == nil {
			continue
		}
		for _, v := range asList(s["volumes"]) {
			name, target, ok := strings.Cut(v, ":")
			if _, named := doc.Volumes[name]; !ok || !named {
				continue
			}
			target, _, _ = strings.Cut(target, ":")
			if !slices.ContainsFunc(strings.Split(text, "\n"), func(l string) bool {
				return strings.HasPrefix(l, "COPY ") && strings.Contains(l, "--chown=65532:65532") && strings.HasSuffix(strings.TrimSpace(l), " "+target)
			}) {
				errs = append(errs, fmt.Errorf("%s: %s, where compose mounts volume %s, is not made in the image owned by 65532 (COPY --chown=65532:65532 ... %s)", dockerfile, target, name, target))
			}
		}
	}
	return errors.Join(errs...)
}

func asList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}
