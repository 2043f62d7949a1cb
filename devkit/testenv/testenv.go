// Package testenv gives tests real infrastructure: an embedded NATS server
// with JetStream shared by a test package, in which every test gets an
// account of its own, and a throwaway PostgreSQL cluster shared by a test
// process, in which every test gets a database of its own cloned from a
// migrated template.
//
// A test package calls Main from TestMain so that both are torn down. Nothing
// here skips: a test that needs PostgreSQL on a machine without it fails and
// says how to install it.
package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/archivist/archivist/devkit/freeport"
	"github.com/archivist/archivist/devkit/natsserver"
	"github.com/archivist/archivist/pkg/bus"
)

// Main runs the package's tests, then stops the shared NATS server,
// PostgreSQL cluster and MinIO server and removes their files.
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shutdownNATS()
	shutdownPostgres()
	shutdownMinIO()
	os.Exit(code)
}

var (
	natsMu   sync.Mutex
	natsSrv  *server.Server
	natsDir  string
	natsAuth = &accountAuth{}
	accounts atomic.Int64
)

// accountAuth admits a client whose user name is a registered test account,
// into that account.
type accountAuth struct {
	mu   sync.Mutex
	srv  *server.Server
	accs map[string]*server.Account
}

func (a *accountAuth) Check(c server.ClientAuthentication) bool {
	name := c.GetOpts().Username
	a.mu.Lock()
	acc, ok := a.accs[name]
	a.mu.Unlock()
	if !ok {
		return false
	}
	c.RegisterUser(&server.User{Username: name, Account: acc})
	return true
}

// NATSServer returns the package's embedded server, starting it on first use.
func NATSServer(t testing.TB) *server.Server {
	t.Helper()
	natsMu.Lock()
	defer natsMu.Unlock()
	if natsSrv != nil {
		return natsSrv
	}
	dir, err := os.MkdirTemp("", "archivist-nats-")
	if err != nil {
		t.Fatalf("testenv: nats store dir: %v", err)
	}
	s, err := natsserver.Start(natsserver.Options{Port: -1, StoreDir: dir, Auth: natsAuth, ServerName: "testenv"})
	if err != nil {
		t.Fatalf("testenv: start embedded nats: %v", err)
	}
	natsAuth.mu.Lock()
	natsAuth.srv = s
	natsAuth.accs = map[string]*server.Account{}
	natsAuth.mu.Unlock()
	natsSrv, natsDir = s, dir
	return s
}

// NATS returns the URL of a fresh JetStream account on the package's shared
// server: the test's streams, consumers and messages are its own.
func NATS(t testing.TB) string {
	t.Helper()
	s := NATSServer(t)
	name := fmt.Sprintf("T%d", accounts.Add(1))
	acc, err := s.RegisterAccount(name)
	if err != nil {
		t.Fatalf("testenv: register account %s: %v", name, err)
	}
	if err := acc.EnableJetStream(nil, nil); err != nil {
		t.Fatalf("testenv: enable jetstream for %s: %v", name, err)
	}
	natsAuth.mu.Lock()
	natsAuth.accs[name] = acc
	natsAuth.mu.Unlock()
	return fmt.Sprintf("nats://%s:x@%s", name, s.Addr().String())
}

// Bus connects a bus as producer to a fresh account, with every stream
// created, and closes it when the test ends.
func Bus(t testing.TB, producer string, opts ...bus.Option) *bus.Bus {
	t.Helper()
	return BusAt(t, NATS(t), producer, opts...)
}

// BusAt connects a bus to url (from NATS) with every stream created, and
// closes it when the test ends. Two buses at one url share an account.
func BusAt(t testing.TB, url, producer string, opts ...bus.Option) *bus.Bus {
	t.Helper()
	ctx := context.Background()
	opts = append([]bus.Option{bus.WithLogger(Logger(t))}, opts...)
	b, err := bus.Connect(ctx, bus.Config{URL: url, Replicas: 1, EnsureStreams: true}, producer, opts...)
	if err != nil {
		t.Fatalf("testenv: connect bus: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	if err := b.EnsureStreams(ctx); err != nil {
		t.Fatalf("testenv: ensure streams: %v", err)
	}
	return b
}

func shutdownNATS() {
	natsMu.Lock()
	defer natsMu.Unlock()
	if natsSrv != nil {
		natsserver.Stop(natsSrv)
		os.RemoveAll(natsDir)
		natsSrv = nil
	}
}

// Logger is a slog logger that writes to the test's log, and falls silent
// once the test has ended (background goroutines may still log).
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if w.done.Load() {
		return len(p), nil
	}
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// FreePort returns a TCP port on 127.0.0.1 that is free and reserved for
// the test until it ends (see package freeport for why not port 0).
func FreePort(t testing.TB) int {
	t.Helper()
	p, release, err := freeport.Take()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(release)
	return p
}
