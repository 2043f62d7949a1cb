package bus_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/natsserver"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/bus"
)

// tlsNATS starts a server whose client port speaks TLS only, with a
// certificate of ca; clientCA, when set, also requires clients to present
// a certificate of it.
func tlsNATS(t *testing.T, ca, clientCA *testenv.CA) string {
	t.Helper()
	_, _, pair := ca.Issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCA.Pool
	}
	s, err := natsserver.Start(natsserver.Options{Port: -1, StoreDir: t.TempDir(), TLS: cfg, ServerName: "tls-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsserver.Stop(s) })
	return strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
}

// TestTLSToNATS: a bus connects to a TLS-only server when it trusts the
// server's CA (NATS_TLS_CA_FILE), and is refused when it does not, when it
// trusts another CA, or when it tries without TLS; under mutual TLS it also
// needs a client certificate (NATS_TLS_CERT_FILE, NATS_TLS_KEY_FILE).
func TestTLSToNATS(t *testing.T) {
	ctx := context.Background()
	ca := testenv.NewCA(t, "archivist-nats-ca")
	url := tlsNATS(t, ca, nil)
	connect := func(cfg bus.Config) error {
		cfg.Replicas = 1
		b, err := bus.Connect(ctx, cfg, "tls-test")
		if err != nil {
			return err
		}
		defer b.Close(ctx)
		return b.EnsureStreams(ctx)
	}
	if err := connect(bus.Config{URL: url, TLSCAFile: ca.File}); err != nil {
		t.Fatalf("with the server's CA: %v", err)
	}
	if err := connect(bus.Config{URL: url}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
	other := testenv.NewCA(t, "another-ca")
	if err := connect(bus.Config{URL: url, TLSCAFile: other.File}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("trusting another CA: %v, want a certificate error", err)
	}
	plain := strings.Replace(url, "tls://", "nats://", 1)
	if err := connect(bus.Config{URL: plain}); err == nil {
		t.Error("a client without TLS was let in")
	}
	if err := connect(bus.Config{URL: url, TLSCAFile: filepath.Join(t.TempDir(), "missing.crt")}); err == nil {
		t.Error("a missing CA file was not an error")
	}

	// Mutual TLS: clients need a certificate of the client CA.
	clients := testenv.NewCA(t, "archivist-nats-clients")
	murl := tlsNATS(t, ca, clients)
	if err := connect(bus.Config{URL: murl, TLSCAFile: ca.File}); err == nil {
		t.Error("mutual TLS: a client without a certificate was let in")
	}
	cert, key, _ := clients.Issue("archivist", x509.ExtKeyUsageClientAuth)
	if err := connect(bus.Config{URL: murl, TLSCAFile: ca.File, TLSCertFile: cert, TLSKeyFile: key}); err != nil {
		t.Fatalf("mutual TLS with a client certificate: %v", err)
	}
	stranger, skey, _ := other.Issue("stranger", x509.ExtKeyUsageClientAuth)
	if err := connect(bus.Config{URL: murl, TLSCAFile: ca.File, TLSCertFile: stranger, TLSKeyFile: skey}); err == nil {
		t.Error("mutual TLS: a certificate of another CA was let in")
	}
}
