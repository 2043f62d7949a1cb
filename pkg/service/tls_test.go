package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn to
// dir's tls.crt and tls.key and returns it.
func writeCert(t *testing.T, dir, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	// Written beside, then renamed: as a Secret's files change at once.
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

// TestAPIsSpeakTLSWhenGivenACertificate (N40): with API_TLS_CERT_FILE and
// API_TLS_KEY_FILE an API speaks TLS only (a plain request gets no
// answer), and a renewed certificate is served without a restart.
func TestAPIsSpeakTLSWhenGivenACertificate(t *testing.T) {
	dir := t.TempDir()
	first := writeCert(t, dir, "first")
	lim := DefaultHTTPLimits
	lim.TLSCertFile, lim.TLSKeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	go ServeHTTP(ctx, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		lim, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, func(a string) { addr <- a })
	a := <-addr
	client := func(ca *x509.Certificate) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	if resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + a + "/"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("a plain-HTTP request was answered")
		}
	}
	resp, err := client(first).Get("https://" + a + "/")
	if err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	resp.Body.Close()
	second := writeCert(t, dir, "second")
	time.Sleep(1100 * time.Millisecond) // a renewal is looked for once a second
	resp, err = client(second).Get("https://" + a + "/")
	if err != nil {
		t.Fatalf("after the renewal: %v", err)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != "second" {
		t.Errorf("after the renewal the server presents %v", resp.TLS.PeerCertificates[0].Subject)
	}
	resp.Body.Close()
}
