package testenv

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
)

// Service is a service started for a test.
type Service struct {
	// NATSURL is the test's NATS account.
	NATSURL string
	// DBURL is the service's database, migrated with its schemas.
	DBURL string
	// Admin is the admin server's address.
	Admin string
	// Stop stops the service (also done when the test ends).
	Stop func()
}

// StartService runs def as its main would, against a fresh NATS account and
// database, with the extra environment env, and waits until /readyz is 200.
func StartService(t testing.TB, def service.Definition, env map[string]string) *Service {
	t.Helper()
	return StartServiceIn(t, def, Shared{NATSURL: NATS(t), DBURL: DBURL(t, def.Schemas...)}, env)
}

// Shared is what several services started for one test share.
type Shared struct {
	// NATSURL is the NATS account (from NATS).
	NATSURL string
	// DBURL is the database (from DBURL).
	DBURL string
	// Blob is the blob store, for services that need one.
	Blob blob.Store
}

// localHTTPAddrs are the services' API addresses for tests: a free port on
// the loopback interface unless the test names one, never a service's
// default (:8080 and the like), so that the tests pass while `archivist dev`
// runs on the same machine.
var localHTTPAddrs = map[string]string{
	"CURATOR_HTTP_ADDR": "127.0.0.1:0", "PWA_HTTP_ADDR": "127.0.0.1:0", "AUDITOR_HTTP_ADDR": "127.0.0.1:0",
	"INDEXER_HTTP_ADDR": "127.0.0.1:0", "AGGREGATOR_HTTP_ADDR": "127.0.0.1:0",
}

// StartServiceIn runs def as its main would, in the shared NATS account and
// database, with the extra environment env, and waits until /readyz is 200.
func StartServiceIn(t testing.TB, def service.Definition, sh Shared, env map[string]string) *Service {
	t.Helper()
	ctx := context.Background()
	s := &Service{NATSURL: sh.NATSURL, DBURL: sh.DBURL}
	admin, err := service.NewAdmin("127.0.0.1:0", Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Admin = admin.Addr()
	common := service.Common{ShutdownTimeout: 10 * time.Second, MigrateOnStart: true, LeaderRetry: 100 * time.Millisecond,
		Bus: bus.Config{URL: s.NATSURL, Replicas: 1, User: env["NATS_USER"], Password: env["NATS_PASSWORD"],
			TLSCAFile: env["NATS_TLS_CA_FILE"], TLSCertFile: env["NATS_TLS_CERT_FILE"], TLSKeyFile: env["NATS_TLS_KEY_FILE"],
			EnsureStreams: env["NATS_ENSURE_STREAMS"] != "false"},
		Store: store.Config{URL: s.DBURL, MaxConns: 5},
		// Tests reach the APIs without keys unless they test the keys.
		Auth: httpauth.Config{Mode: "off", KeysFile: env["API_KEYS_FILE"]}}
	if v := env["API_AUTH"]; v != "" {
		common.Auth.Mode = v
	}
	if v, err := strconv.ParseFloat(env["API_RATE_LIMIT"], 64); err == nil {
		common.Auth.RateLimit = v
	}
	if v, err := strconv.Atoi(env["API_RATE_BURST"]); err == nil {
		common.Auth.RateBurst = v
	}
	if v, err := strconv.Atoi(env["DATABASE_MAX_CONNS"]); err == nil && v > 0 {
		common.Store.MaxConns = int32(v)
	}
	bs := sh.Blob
	if def.NeedsBlob && bs == nil {
		if bs, err = blob.NewLocal(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	lookuper := envconfig.MultiLookuper(envconfig.MapLookuper(env), envconfig.MapLookuper(localHTTPAddrs))
	r, err := service.Start(ctx, def, common, service.Deps{Log: Logger(t), Admin: admin, Blob: bs, Lookuper: lookuper})
	if err != nil {
		t.Fatalf("testenv: start %s: %v", def.Name, err)
	}
	stopped := false
	s.Stop = func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := r.Stop(sctx); err != nil {
			t.Errorf("stop %s: %v", def.Name, err)
		}
		admin.Close(sctx)
	}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not ready after 15s", def.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
