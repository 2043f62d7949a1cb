package bus_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/natsserver"
)

// testCA is a certificate authority made for one test, as cert-manager's
// CA issuer is in the deployment (k8s/cert-manager).
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	// File is the CA's certificate as PEM, what a client trusts.
	File string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := &testCA{t: t, dir: t.TempDir()}
	ca.key = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.pool = x509.NewCertPool()
	ca.pool.AddCert(ca.cert)
	ca.File = ca.write(name+".crt", "CERTIFICATE", der)
	return ca
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (ca *testCA) write(name, kind string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// issue signs a certificate for name (an IP address for a server) and
// returns it with its key, as files and as a tls.Certificate.
func (ca *testCA) issue(name string, usage x509.ExtKeyUsage) (certFile, keyFile string, pair tls.Certificate) {
	key := newKey(ca.t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	certFile = ca.write(name+"-"+tmpl.SerialNumber.String()+".crt", "CERTIFICATE", der)
	keyFile = ca.write(name+"-"+tmpl.SerialNumber.String()+".key", "EC PRIVATE KEY", kder)
	pair, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		ca.t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// tlsNATS starts a server whose client port speaks TLS only, with a
// certificate of ca; clientCA, when set, also requires clients to present
// a certificate of it.
func tlsNATS(t *testing.T, ca, clientCA *testCA) string {
	t.Helper()
	_, _, pair := ca.issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCA.pool
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
	ca := newTestCA(t, "archivist-nats-ca")
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
	other := newTestCA(t, "another-ca")
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
	clients := newTestCA(t, "archivist-nats-clients")
	murl := tlsNATS(t, ca, clients)
	if err := connect(bus.Config{URL: murl, TLSCAFile: ca.File}); err == nil {
		t.Error("mutual TLS: a client without a certificate was let in")
	}
	cert, key, _ := clients.issue("archivist", x509.ExtKeyUsageClientAuth)
	if err := connect(bus.Config{URL: murl, TLSCAFile: ca.File, TLSCertFile: cert, TLSKeyFile: key}); err != nil {
		t.Fatalf("mutual TLS with a client certificate: %v", err)
	}
	stranger, skey, _ := other.issue("stranger", x509.ExtKeyUsageClientAuth)
	if err := connect(bus.Config{URL: murl, TLSCAFile: ca.File, TLSCertFile: stranger, TLSKeyFile: skey}); err == nil {
		t.Error("mutual TLS: a certificate of another CA was let in")
	}
}
