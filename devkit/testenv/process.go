package testenv

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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
//
// Its output goes to a file, not to the test's log: a test that runs many
// processes (the fault soak restarts one every few seconds) would otherwise
// bury its own verdict under their lines. When the test fails, the last
// lines of every process still running at its end, or that exited without
// being killed, follow the test's own errors, and all the files are kept in
// a directory the test's log names.
type Process struct {
	// Admin is the admin server's address.
	Admin string
	// LogFile is the file the process's standard output and error go to.
	LogFile string
	cmd     *exec.Cmd
	done    chan struct{}
	killed  atomic.Bool
}

// processTailLines is how many of a process's last lines a failed test shows.
const processTailLines = 60

var (
	logDirsMu sync.Mutex
	logDirs   = map[testing.TB]*processLogs{}
)

// processLogs is the directory of one test's process logs.
type processLogs struct {
	dir string
	n   int
}

// processLogFile opens a new log file for a process of pkg started by t,
// in a directory that is removed when t passes and kept when it fails.
func processLogFile(t testing.TB, pkg string) (*os.File, error) {
	t.Helper()
	logDirsMu.Lock()
	defer logDirsMu.Unlock()
	l := logDirs[t]
	if l == nil {
		dir, err := os.MkdirTemp("", "archivist-logs-"+unsafeChars.ReplaceAllString(t.Name(), "_")+"-")
		if err != nil {
			return nil, err
		}
		l = &processLogs{dir: dir}
		logDirs[t] = l
		t.Cleanup(func() {
			logDirsMu.Lock()
			delete(logDirs, t)
			logDirsMu.Unlock()
			if t.Failed() {
				t.Logf("testenv: every process's full log is kept in %s", dir)
				return
			}
			os.RemoveAll(dir)
		})
	}
	l.n++
	return os.Create(filepath.Join(l.dir, fmt.Sprintf("%03d-%s.log", l.n, filepath.Base(pkg))))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

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
	out, err := processLogFile(t, pkg)
	if err != nil {
		t.Fatalf("testenv: log file for %s: %v", pkg, err)
	}
	p.LogFile = out.Name()
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("testenv: start %s: %v", pkg, err)
	}
	go func() { _ = p.cmd.Wait(); out.Close(); close(p.done) }()
	t.Cleanup(func() {
		interesting := !p.killed.Load() // running at the end, or exited by itself
		p.Kill()
		if t.Failed() && interesting {
			t.Logf("testenv: %s (%s), its last lines:\n%s", filepath.Base(pkg), p.LogFile, tailLines(p.LogFile, processTailLines))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("testenv: %s exited before it was ready: %v; its last lines:\n%s", pkg, p.cmd.ProcessState, tailLines(p.LogFile, processTailLines))
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
			t.Fatalf("testenv: %s not ready after 30s; its last lines:\n%s", pkg, tailLines(p.LogFile, processTailLines))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL, which the process cannot catch: no deferred cleanup,
// no drain, no graceful stop; it returns once the process is gone.
func (p *Process) Kill() {
	p.killed.Store(true)
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// tailLines returns the last n lines of the file at path.
func tailLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	b = bytes.TrimRight(b, "\n")
	i := len(b)
	for range n {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			return string(b)
		}
		i = j
	}
	return string(b[i+1:])
}

// Peer makes a command of a peer a benchmark compares with, writing to
// /dev/null as `peer > /dev/null` does: output given to io.Discard would
// cross a pipe and a copy in the test process, and slow the peer.
func Peer(tb testing.TB, name string, args ...string) *exec.Cmd {
	tb.Helper()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { devNull.Close() })
	cmd := exec.Command(name, args...)
	cmd.Stdout = devNull
	return cmd
}
