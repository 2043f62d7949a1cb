// Package natsserver runs an embedded NATS server with JetStream: the one
// `archivist dev` starts, and the one every test package shares.
package natsserver

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configures an embedded server.
type Options struct {
	// Host to listen on (default 127.0.0.1).
	Host string
	// Port to listen on; -1 picks a free port.
	Port int
	// MonitorPort serves /healthz and /varz; 0 disables it.
	MonitorPort int
	// StoreDir is JetStream's file store.
	StoreDir string
	// SyncAlways fsyncs every write before it is acknowledged, as deployed
	// NATS must (the Jepsen 2025 finding on lazy fsync).
	SyncAlways bool
	// ServerName names the server (default "archivist").
	ServerName string
	// Auth, when set, authenticates every client (tests use it to give each
	// test its own account).
	Auth server.Authentication
	// TLS, when set, is the client port's TLS configuration: every client
	// must speak TLS, and with ClientAuth RequireAndVerifyClientCert present
	// a certificate of ClientCAs (mutual TLS).
	TLS *tls.Config
	// ConfigFile, when set, is a NATS server configuration file (for example
	// charts/archivist-nats/files/auth.conf) whose settings the fields above then override.
	ConfigFile string
}

// Start starts a server and waits until it accepts connections.
func Start(o Options) (*server.Server, error) {
	opts, err := o.server()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("new nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server on %s:%d not ready after 10s", opts.Host, opts.Port)
	}
	return s, nil
}

// Reload applies o (its ConfigFile read again: users issued or revoked) to
// the running server s, started with Start(o), as a SIGHUP does to a
// deployed server: connections stay, except those of users no longer
// allowed. The port must be the one s listens on.
func Reload(s *server.Server, o Options) error {
	opts, err := o.server()
	if err != nil {
		return err
	}
	if err := s.ReloadOptions(opts); err != nil {
		return fmt.Errorf("reload nats: %w", err)
	}
	return nil
}

// server is the server options o stands for.
func (o Options) server() (*server.Options, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ServerName == "" {
		o.ServerName = "archivist"
	}
	opts := &server.Options{}
	if o.ConfigFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("nats config %s: %w", o.ConfigFile, err)
		}
	}
	opts.ServerName, opts.Host, opts.Port = o.ServerName, o.Host, o.Port
	opts.JetStream, opts.StoreDir, opts.SyncAlways = true, o.StoreDir, o.SyncAlways
	opts.NoSigs, opts.NoLog, opts.MaxPayload = true, true, 8<<20
	if o.Auth != nil {
		opts.CustomClientAuthentication = o.Auth
	}
	if o.TLS != nil {
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = o.TLS, true, 2
		opts.TLSVerify = o.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	}
	if o.MonitorPort != 0 {
		opts.HTTPHost = o.Host
		opts.HTTPPort = o.MonitorPort
	}
	return opts, nil
}

// Stop shuts the server down and waits until it has.
func Stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}
