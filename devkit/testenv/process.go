package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu  sync.Mutex
	builtDir string
	built    = map[string]string{}
)

// Binary builds the main package pkg (an import path in the workspace, such
// as github.com/archivist/archivist/services/indexer) once per test process
// and returns the executable's path.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	if builtDir == "" {
		d, err := os.MkdirTemp("", "archivist-bin-")
		if err != nil {
			t.Fatalf("testenv: bin dir: %v", err)
		}
		builtDir = d
	}
	out := filepath.Join(builtDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: go build %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// Process is a service running as its own operating-system process, so a
// test can kill it the way a node failure or the OOM killer does.
type Process struct {
	// Admin is the admin server's address.
	Admin string
	cmd   *exec.Cmd
	done  chan struct{}
}

// StartProcess runs the service main pkg as a child process in the shared
// NATS account, database and local blob directory blobDir (empty for
// none), with the extra environment env, and waits until /readyz is 200. The
// process is killed when the test ends if it is still running.
func StartProcess(t testing.TB, pkg string, sh Shared, blobDir string, env map[string]string) *Process {
	t.Helper()
	bin := Binary(t, pkg)
	p := &Process{Admin: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), done: make(chan struct{})}
	user, pass := "", ""
	if i, j := strings.Index(sh.NATSURL, "://"), strings.LastIndex(sh.NATSURL, "@"); i >= 0 && j > i {
		user, pass, _ = strings.Cut(sh.NATSURL[i+3:j], ":")
	}
	base := map[string]string{
		"NATS_URL": sh.NATSURL, "NATS_USER": user, "NATS_PASSWORD": pass, "DATABASE_URL": sh.DBURL,
		"ADMIN_ADDR": p.Admin, "LOG_FORMAT": "json", "SHUTDOWN_TIMEOUT": "10s", "DATABASE_MAX_CONNS": "5", "LEADER_RETRY": "200ms",
		"API_AUTH": "off", // tests reach the APIs without keys unless they test the keys
	}
	if blobDir != "" {
		base["BLOB_URL"] = "file://" + blobDir
	}
	for k, v := range localHTTPAddrs {
		base[k] = v
	}
	for k, v := range env {
		base[k] = v
	}
	p.cmd = exec.Command(bin)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range base {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout = &testWriter{t: t}
	p.cmd.Stderr = &testWriter{t: t}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", pkg, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("testenv: %s exited before it was ready: %v", pkg, p.cmd.ProcessState)
		default:
		}
		resp, err := http.Get("http://" + p.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			p.Kill()
			t.Fatalf("testenv: %s not ready after 30s", pkg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL, which the process cannot catch: no deferred cleanup,
// no drain, no graceful stop; it returns once the process is gone.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}
