// Package dev runs the whole of Archivist in one process: an embedded NATS
// server with JetStream, a private PostgreSQL cluster (unless DATABASE_URL is
// set), a local blob store, and every service.
package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/sethvargo/go-envconfig"

	"github.com/archivist/archivist/devkit/minioserver"
	"github.com/archivist/archivist/devkit/natsserver"
	"github.com/archivist/archivist/devkit/pgcluster"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/service"
)

// Options are the flags of `archivist dev`.
type Options struct {
	// DataDir holds nats/, pg/ and blobs/.
	DataDir string `env:"ARCHIVIST_DATA_DIR, default=.archivist"`
	// NATSPort is the embedded NATS server's client port.
	NATSPort int `env:"ARCHIVIST_NATS_PORT, default=4222"`
	// NATSMonitorPort serves NATS monitoring (/healthz, /jsz); 0 disables it.
	NATSMonitorPort int `env:"ARCHIVIST_NATS_MONITOR_PORT, default=8222"`
	// PGPort is the private PostgreSQL cluster's port.
	PGPort int `env:"ARCHIVIST_PG_PORT, default=54329"`
	// AdminAddr is the admin server of the whole process.
	AdminAddr string `env:"ADMIN_ADDR, default=127.0.0.1:9090"`
	// CuratorAddr is the curation API's address.
	CuratorAddr string `env:"CURATOR_HTTP_ADDR, default=127.0.0.1:8080"`
	// PWAAddr is the research status API's address.
	PWAAddr string `env:"PWA_HTTP_ADDR, default=127.0.0.1:8081"`
	// AuditorAddr is the audit API's address.
	AuditorAddr string `env:"AUDITOR_HTTP_ADDR, default=127.0.0.1:8082"`
	// IndexerAddr is the index API's address.
	IndexerAddr string `env:"INDEXER_HTTP_ADDR, default=127.0.0.1:8083"`
	// AggregatorAddr is the CDX query API's address.
	AggregatorAddr string `env:"AGGREGATOR_HTTP_ADDR, default=127.0.0.1:8084"`
	// DashboardAddr is the operator's dashboard's address.
	DashboardAddr string `env:"DASHBOARD_HTTP_ADDR, default=127.0.0.1:8090"`
	// Demo seeds a little of everything once the system is ready (--demo).
	Demo bool `env:"ARCHIVIST_DEMO, default=false"`
	// MinIO keeps the blobs in a MinIO server (a real S3 server, started
	// from the machine's binary, data under DataDir/minio): the archive in
	// bucket archive, its second copy, which the auditor writes and
	// repairs from, in bucket archive-copy (--minio).
	MinIO bool `env:"ARCHIVIST_DEV_MINIO, default=false"`
	// MinIOPort is that server's S3 port (the next one its console's).
	MinIOPort int `env:"ARCHIVIST_DEV_MINIO_PORT, default=9000"`
}

// The buckets of `archivist dev --minio`.
const (
	MinIOArchiveBucket = "archive"
	MinIOCopyBucket    = "archive-copy"
)

// Run runs everything until ctx ends, printing where each part listens to out.
func Run(ctx context.Context, o Options, defs []service.Definition, log *slog.Logger, out io.Writer) (err error) {
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}

	ns, err := natsserver.Start(natsserver.Options{
		Port: o.NATSPort, MonitorPort: o.NATSMonitorPort, StoreDir: filepath.Join(dataDir, "nats"), SyncAlways: true,
	})
	if err != nil {
		return fmt.Errorf("embedded nats on port %d: %w", o.NATSPort, err)
	}
	defer natsserver.Stop(ns)
	natsURL := ns.ClientURL()

	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		// A password of its own (kept under the data dir): the cluster does
		// not trust every user of the machine.
		pw, err := devSecret(filepath.Join(dataDir, "pg-password"))
		if err != nil {
			return err
		}
		pg := &pgcluster.Cluster{Dir: filepath.Join(dataDir, "pg"), Host: "127.0.0.1", Port: o.PGPort, Durable: true, Password: pw}
		if err := pg.Init(ctx); err != nil {
			return err
		}
		if err := pg.Start(ctx); err != nil {
			return fmt.Errorf("private postgresql: %w", err)
		}
		defer pg.Stop()
		if err := ensureDatabase(ctx, pg.URL("postgres"), "archivist"); err != nil {
			return err
		}
		dbURL = pg.URL("archivist")
	}

	keysFile, tokenFile, err := devKeys(dataDir)
	if err != nil {
		return err
	}
	blobURL, s3 := "file://"+filepath.Join(dataDir, "blobs"), map[string]string{}
	if o.MinIO {
		m, err := startMinIO(ctx, dataDir, o.MinIOPort)
		if err != nil {
			return err
		}
		defer m.Stop()
		blobURL = m.URL(MinIOArchiveBucket, "")
		s3 = map[string]string{"S3_ACCESS_KEY_ID": m.AccessKey, "S3_SECRET_ACCESS_KEY": m.SecretKey,
			"AUDITOR_SECONDARY_BLOB_URL": m.URL(MinIOCopyBucket, ""), "AUDITOR_AUTO_REPAIR": "objects/",
			"AUDITOR_SECONDARY_S3_ACCESS_KEY_ID": m.AccessKey, "AUDITOR_SECONDARY_S3_SECRET_ACCESS_KEY": m.SecretKey,
			// The second copy's own audit goes round in minutes here.
			"AUDITOR_SECONDARY_CYCLE": "2m"}
	}
	defaults := map[string]string{
		"API_AUTH":             "keys",
		"API_KEYS_FILE":        keysFile,
		"NATS_URL":             natsURL,
		"DATABASE_URL":         dbURL,
		"BLOB_URL":             blobURL,
		"ADMIN_ADDR":           o.AdminAddr,
		"CURATOR_HTTP_ADDR":    o.CuratorAddr,
		"PWA_HTTP_ADDR":        o.PWAAddr,
		"AUDITOR_HTTP_ADDR":    o.AuditorAddr,
		"INDEXER_HTTP_ADDR":    o.IndexerAddr,
		"AGGREGATOR_HTTP_ADDR": o.AggregatorAddr,
		"DASHBOARD_HTTP_ADDR":  o.DashboardAddr,
		// The dashboard asks the APIs of this process.
		"DASHBOARD_CURATOR_URL":    "http://" + hostPort(o.CuratorAddr),
		"DASHBOARD_PWA_URL":        "http://" + hostPort(o.PWAAddr),
		"DASHBOARD_AUDITOR_URL":    "http://" + hostPort(o.AuditorAddr),
		"DASHBOARD_INDEXER_URL":    "http://" + hostPort(o.IndexerAddr),
		"DASHBOARD_AGGREGATOR_URL": "http://" + hostPort(o.AggregatorAddr),
		// A Wayback front end's open view of the index: no key, captures
		// of the last 90 days hidden, 20 queries a second a client.
		"AGGREGATOR_ACCESS_POINTS": "public:embargo=90:rate=20:burst=40",
		// Archive files dropped under warcs/ in the blob store are indexed,
		// found within seconds.
		"INDEXER_REPOSITORY_PREFIX": "warcs/",
		"INDEXER_SCAN_INTERVAL":     "10s",
		// Ingest works under the data dir and may fetch from this machine.
		"INGEST_WORK_DIR":      filepath.Join(dataDir, "ingest"),
		"INGEST_ALLOW_PRIVATE": "true",
		// The researcher's analysed audio, under the data dir too.
		"RESEARCHER_CACHE_DIR": filepath.Join(dataDir, "research-cache"),
		// One process: a replica taking over needs no long grace.
		"LEADER_RETRY": "500ms",
		// The APIs answer only to this machine's names (and those they
		// listen on): a page of another site that rebinds its name to
		// 127.0.0.1 reaches none of them.
		"API_ALLOWED_HOSTS": allowedHosts(o.CuratorAddr, o.PWAAddr, o.AuditorAddr, o.IndexerAddr, o.AggregatorAddr, o.DashboardAddr),
	}
	for k, v := range s3 {
		defaults[k] = v
	}
	lookuper := envconfig.MultiLookuper(envconfig.OsLookuper(), envconfig.MapLookuper(defaults))
	var common service.Common
	if err := config.Load(ctx, &common, lookuper); err != nil {
		return err
	}
	admin, err := service.NewAdmin(common.AdminAddr, log)
	if err != nil {
		return err
	}
	defer admin.Close(context.WithoutCancel(ctx))

	monitor := "off"
	if o.NATSMonitorPort != 0 {
		monitor = "http://127.0.0.1:" + strconv.Itoa(o.NATSMonitorPort)
	}
	fmt.Fprintf(out, `Archivist is starting (data in %s)
  NATS (JetStream)  %s   monitoring %s
  PostgreSQL        %s
  blob store        %s
  curation API      http://%s/v1/episodes, /v1/clips, /v1/works/...
  research status   http://%s/v1/research/status
  audit             http://%s/v1/audit/status, /v1/audit/check
  index             http://%s/v1/index/status (ARC/WARC files under the blob store's warcs/)
  CDX API           http://%s/cdx?url=...  (staff's, with the key)
                    http://%s/public/cdx?url=...  (a Wayback's: no key; the last 90 days hidden)
  dashboard         http://%s/ (sign in with the API key below)
  admin             http://%s/healthz  /readyz  /metrics
  API key           %s (operator and publisher as source "http"; the CLI reads it;
                    curl -H "Authorization: Bearer $(cat %s)" ...)
Ctrl-C stops everything.
`, dataDir, natsURL, monitor, redacted(dbURL), common.Blob.URL, hostPort(o.CuratorAddr), hostPort(o.PWAAddr), hostPort(o.AuditorAddr), hostPort(o.IndexerAddr), hostPort(o.AggregatorAddr), hostPort(o.AggregatorAddr), hostPort(o.DashboardAddr), admin.Addr(),
		tokenFile, tokenFile)

	if o.Demo {
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return err
		}
		blobs, err := blob.Open(ctx, common.Blob)
		if err != nil {
			return err
		}
		d := &demo{blobs: blobs, token: strings.TrimSpace(string(token)), admin: admin.Addr(), curator: "http://" + hostPort(o.CuratorAddr),
			auditor: "http://" + hostPort(o.AuditorAddr), out: out}
		go func() {
			if err := d.run(ctx); err != nil && ctx.Err() == nil {
				log.ErrorContext(ctx, "demo data", "err", err)
			}
		}()
	}
	return service.Serve(ctx, defs, common, service.Deps{Log: log, Admin: admin, Lookuper: lookuper})
}

// TokenFile is where `archivist dev` keeps the local operator's API key,
// under the data dir; the CLI reads it (ARCHIVIST_TOKEN overrides).
const TokenFile = "api.token"

// devKeys makes, on the first run, the data dir's keys file with one key
// for the local operator (operator and publisher, as source "http") and
// writes the key itself to the token file, readable by its owner only.
func devKeys(dataDir string) (keysFile, tokenFile string, err error) {
	keysFile, tokenFile = filepath.Join(dataDir, "api-keys"), filepath.Join(dataDir, TokenFile)
	if _, err := os.Stat(keysFile); err == nil {
		if _, err := os.Stat(tokenFile); err == nil {
			return keysFile, tokenFile, nil
		}
	}
	key, line := apiauth.NewKeyFor(apiauth.Identity{Name: "local-operator", Roles: []apiauth.Role{apiauth.Operator, apiauth.Publisher}, Source: "http",
		ARKs: []string{apiauth.AnyCollection}})
	if err := os.WriteFile(tokenFile, []byte(key+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("API token: %w", err)
	}
	keys := "# API keys of this development system: NAME ROLES SHA256-OF-KEY [source=SOURCE] [collections=C,...] [arks=A,...]\n" + line + "\n"
	if err := os.WriteFile(keysFile, []byte(keys), 0o600); err != nil {
		return "", "", fmt.Errorf("API keys: %w", err)
	}
	return keysFile, tokenFile, nil
}

// allowedHosts are the loopback names and the hosts of addrs (unless they
// listen on every address), comma-separated.
func allowedHosts(addrs ...string) string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	for _, a := range addrs {
		h, _, err := net.SplitHostPort(a)
		if err != nil || h == "" || h == "0.0.0.0" || h == "::" || slices.Contains(hosts, h) {
			continue
		}
		hosts = append(hosts, h)
	}
	return strings.Join(hosts, ",")
}

// devSecret reads the secret kept in file, making a random one (readable by
// its owner only) on the first run.
func devSecret(file string) (string, error) {
	if b, err := os.ReadFile(file); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(b[:])
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", file, err)
	}
	return secret, nil
}

func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to private postgresql: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func hostPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return "127.0.0.1:" + port
	}
	return addr
}

func redacted(u string) string {
	for _, v := range config.Vars(&struct {
		U string `env:"U"`
	}{u}) {
		return v.Value
	}
	return u
}

// startMinIO starts the MinIO server of `archivist dev --minio`, its data
// and credentials kept under dataDir/minio (the same across restarts), and
// makes its two buckets.
func startMinIO(ctx context.Context, dataDir string, port int) (*minioserver.Server, error) {
	dir := filepath.Join(dataDir, "minio")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("minio dir: %w", err)
	}
	credsFile := filepath.Join(dir, "credentials")
	var access, secret string
	if b, err := os.ReadFile(credsFile); err == nil {
		access, secret, _ = strings.Cut(strings.TrimSpace(string(b)), " ")
	} else {
		var rb [20]byte
		_, _ = rand.Read(rb[:])
		access, secret = "archivist-dev", hex.EncodeToString(rb[:])
		if err := os.WriteFile(credsFile, []byte(access+" "+secret+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("minio credentials: %w", err)
		}
	}
	m, err := minioserver.Start(ctx, minioserver.Options{Dir: filepath.Join(dir, "data"), AccessKey: access, SecretKey: secret,
		Addr: fmt.Sprintf("127.0.0.1:%d", port), ConsoleAddr: fmt.Sprintf("127.0.0.1:%d", port+1)})
	if err != nil {
		return nil, fmt.Errorf("--minio: %w", err)
	}
	for _, b := range []string{MinIOArchiveBucket, MinIOCopyBucket} {
		if err := m.MakeBucket(ctx, b); err != nil {
			m.Stop()
			return nil, err
		}
	}
	return m, nil
}
