// Package minioserver runs a MinIO server, a real S3 server, from the
// machine's binary: a data directory, a port on 127.0.0.1 and credentials
// of its own, for the tests and `archivist dev`. MinIO is AGPL-licensed:
// it runs as a separate process and is never linked into Archivist.
package minioserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Version is the MinIO release Archivist is tested with (a module
// version: MinIO builds with go install).
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

// Install is the command that builds it.
const Install = "go install github.com/minio/minio@" + Version

// ErrNoBinary says the machine has no minio binary.
var ErrNoBinary = errors.New("no minio binary (ARCHIVIST_MINIO, PATH, GOBIN, GOPATH/bin): " + Install + " (.ci/run does)")

// Binary finds the minio binary: ARCHIVIST_MINIO, then PATH, then where
// go install puts it (GOBIN, GOPATH/bin, ~/go/bin).
func Binary() (string, error) {
	if p := os.Getenv("ARCHIVIST_MINIO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ARCHIVIST_MINIO %s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		if p := filepath.Join(d, "minio"); isFile(p) {
			return p, nil
		}
	}
	return "", ErrNoBinary
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Server is a running MinIO server.
type Server struct {
	// Endpoint is its S3 API, host:port.
	Endpoint string
	// AccessKey and SecretKey are its root credentials.
	AccessKey, SecretKey string
	// Dir is its data directory.
	Dir string

	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// Options shape a server.
type Options struct {
	// Dir is the data directory (created if missing).
	Dir string
	// Addr is where the S3 API listens (127.0.0.1:PORT); ConsoleAddr
	// where MinIO's console would (it is turned off, but takes a port).
	Addr, ConsoleAddr string
	// AccessKey and SecretKey are the root credentials (made at random
	// when empty).
	AccessKey, SecretKey string
}

// Start starts a server and waits until it is ready (at most a minute).
// Its output goes to Dir/../minio.log.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if o.AccessKey == "" {
		o.AccessKey = "archivist" + random(4)
	}
	if o.SecretKey == "" {
		o.SecretKey = random(20)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("minio data dir: %w", err)
	}
	logf, err := os.Create(filepath.Join(filepath.Dir(o.Dir), "minio.log"))
	if err != nil {
		return nil, fmt.Errorf("minio log: %w", err)
	}
	cmd := exec.Command(bin, "server", o.Dir, "--address", o.Addr, "--console-address", o.ConsoleAddr, "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+o.AccessKey, "MINIO_ROOT_PASSWORD="+o.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on")
	cmd.Stdout, cmd.Stderr = logf, logf
	// It dies with the process that started it (a test killed mid-run
	// leaves no server behind), as the tests' PostgreSQL does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start minio: %w", err)
	}
	s := &Server{Endpoint: o.Addr, AccessKey: o.AccessKey, SecretKey: o.SecretKey, Dir: o.Dir, cmd: cmd, done: make(chan error, 1), log: logf}
	go func() { s.done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.Addr+"/minio/health/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			logf.Close()
			out, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("minio exited before it was ready (%v): %s", err, tail(out))
		case <-ctx.Done():
			s.Stop()
			out, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("minio on %s was not ready within a minute: %s", o.Addr, tail(out))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the server.
func (s *Server) Stop() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return s.log.Close()
}

// Client is an S3 client of the server as its root user (for a test or an
// operator to act behind the store's back).
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
}

// MakeBucket makes a bucket (an existing one is kept).
func (s *Server) MakeBucket(ctx context.Context, bucket string) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		if ok, _ := c.BucketExists(ctx, bucket); ok {
			return nil
		}
		return fmt.Errorf("make bucket %s: %w", bucket, err)
	}
	return nil
}

// URL is a BLOB_URL of bucket (under prefix) on the server; the
// credentials go separately (S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY).
func (s *Server) URL(bucket, prefix string) string {
	return "s3://" + bucket + "/" + prefix + "?endpoint=" + s.Endpoint + "&secure=false&path_style=true&region=us-east-1"
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
