// Package pgcluster creates and runs a private PostgreSQL cluster from the
// machine's PostgreSQL binaries: the one `archivist dev` keeps under
// ./.archivist/pg, and the throwaway one each test process starts.
//
// initdb and postgres refuse to run as root. When the caller is root, the
// cluster runs as the unprivileged "postgres" user (or "nobody"), which is
// given the data and socket directories.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/devkit/freeport"
)

// Install says how to get PostgreSQL onto a machine that lacks it.
const Install = "install PostgreSQL (Debian/Ubuntu: `apt-get install -y postgresql`; macOS: `brew install postgresql`), put its bin directory on PATH, or set DATABASE_URL to a server you have"

// FindBinaries returns the directory holding initdb, pg_ctl and postgres:
// from PATH, else the newest of Debian's /usr/lib/postgresql/*/bin.
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range append(dirs, "/usr/local/pgsql/bin", "/opt/homebrew/bin") {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL binaries (initdb, postgres) found on PATH or in /usr/lib/postgresql/*/bin: %s", Install)
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Cluster is a PostgreSQL cluster in a directory.
type Cluster struct {
	// Dir is the data directory.
	Dir string
	// SocketDir holds the unix socket; it defaults to Dir.
	SocketDir string
	// Host is the TCP address to listen on; empty listens on the socket only.
	Host string
	// Port is the port (TCP and socket name); 0 picks a free one at Start.
	Port int
	// Durable keeps fsync on (a dev cluster); off, the cluster trades crash
	// safety for speed (tests).
	Durable bool
	// Password, when set, is the postgres user's password, and a cluster
	// made by Init asks every connection for it (scram-sha-256) instead of
	// trusting every local user; URL carries it.
	Password string
	// Settings are server settings beyond the defaults (-c NAME=VALUE at
	// Start): ArchiveSettings' continuous archiving, say.
	Settings map[string]string

	bin         string
	cred        *syscall.Credential
	cmd         *exec.Cmd
	done        chan error
	releasePort func()
}

// Init creates the cluster with initdb unless Dir already holds one.
func (c *Cluster) Init(ctx context.Context) error {
	bin, err := FindBinaries()
	if err != nil {
		return err
	}
	c.bin = bin
	if c.SocketDir == "" {
		c.SocketDir = c.Dir
	}
	if c.cred, err = runAs(); err != nil {
		return err
	}
	for _, d := range []string{c.Dir, c.SocketDir} {
		if err := c.reachable(filepath.Dir(d)); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := c.chown(d); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err == nil {
		return nil
	}
	args := []string{"-D", c.Dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"}
	if c.Password != "" {
		pw := filepath.Join(filepath.Dir(c.Dir), ".pgcluster-pwfile")
		if err := os.WriteFile(pw, []byte(c.Password+"\n"), 0o600); err != nil {
			return fmt.Errorf("password file: %w", err)
		}
		defer os.Remove(pw)
		if err := c.chown(pw); err != nil {
			return err
		}
		args = []string{"-D", c.Dir, "-U", "postgres", "-A", "scram-sha-256", "--pwfile", pw, "-E", "UTF8", "--locale=C"}
	}
	if !c.Durable {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
	c.prepare(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w: %s", c.Dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Start starts postgres and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	if c.bin == "" {
		return errors.New("pgcluster: Start before Init")
	}
	if c.Port == 0 {
		p, release, err := freeport.Take()
		if err != nil {
			return err
		}
		c.Port, c.releasePort = p, release
	}
	args := []string{"-D", c.Dir, "-p", strconv.Itoa(c.Port), "-k", c.SocketDir,
		"-c", "listen_addresses=" + c.Host, "-c", "max_connections=300", "-c", "shared_buffers=64MB"}
	if !c.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Settings)) {
		args = append(args, "-c", k+"="+c.Settings[k])
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	c.prepare(cmd)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	logf, err := os.OpenFile(filepath.Join(c.Dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open postgres log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd = cmd
	c.done = make(chan error, 1)
	go func() { c.done <- cmd.Wait(); logf.Close() }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case werr := <-c.done:
			return fmt.Errorf("postgres exited at start (%v); %s says:\n%s", werr, filepath.Join(c.Dir, "postgres.log"), logTail(filepath.Join(c.Dir, "postgres.log")))
		case <-ctx.Done():
			c.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.Stop()
			return fmt.Errorf("postgres not ready after 30s: %w (see %s)", err, filepath.Join(c.Dir, "postgres.log"))
		}
	}
}

// logTail is the end of a log file (its last 2 KiB), for an error.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// URL is a connection URL for database db, over TCP when the cluster listens
// on it, else over the unix socket.
func (c *Cluster) URL(db string) string {
	user := "postgres"
	if c.Password != "" {
		user = url.UserPassword("postgres", c.Password).String()
	}
	if c.Host != "" {
		return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", user, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), db)
	}
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", user, db, c.SocketDir, c.Port)
}

// Stop shuts postgres down (fast shutdown: open transactions roll back) and
// waits for it to exit.
func (c *Cluster) Stop() error {
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
	if c.releasePort != nil {
		c.releasePort()
		c.releasePort = nil
	}
	return nil
}

// ArchiveSettings are the settings of continuous archiving into dir: every
// completed WAL segment copied there (never over one already there), what
// a point-in-time recovery replays on top of a base backup.
func ArchiveSettings(dir string) map[string]string {
	return map[string]string{
		"wal_level":       "replica",
		"archive_mode":    "on",
		"archive_command": fmt.Sprintf("test ! -f '%s/%%f' && cp %%p '%s/%%f'", dir, dir),
	}
}

// PrepareArchive makes dir, the WAL archive, writable by the user
// PostgreSQL runs as.
func (c *Cluster) PrepareArchive(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return c.chown(dir)
}

// BaseBackup takes a base backup of the running cluster into dir with
// PostgreSQL's pg_basebackup: a copy of the data directory, with the WAL
// written while it was taken (-X stream), that starts as a cluster of its
// own; with a WAL archive it is the base of a point-in-time recovery.
func (c *Cluster) BaseBackup(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := c.chown(dir); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "pg_basebackup"), "-h", c.SocketDir, "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-D", dir, "-X", "stream", "--checkpoint=fast", "--no-sync")
	c.prepare(cmd)
	if c.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+c.Password)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup into %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Recover readies dir, a base backup's copy, to recover from the WAL
// archive up to target and be promoted (zero target: to the archive's
// end), as PostgreSQL's point-in-time recovery does: recovery.signal and
// the restore command and target in postgresql.auto.conf. Start it then:
// it replays the archive, stops at the last transaction committed at or
// before target, and opens for writes.
func Recover(dir, archive string, target time.Time) error {
	conf := fmt.Sprintf("\n# Point-in-time recovery (pgcluster.Recover)\nrestore_command = 'cp ''%s/%%f'' %%p'\nrecovery_target_action = 'promote'\n", archive)
	if !target.IsZero() {
		conf += fmt.Sprintf("recovery_target_time = '%s'\n", target.UTC().Format("2006-01-02 15:04:05.999999-07:00"))
	}
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("recover %s: %w", dir, err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	signal := filepath.Join(dir, "recovery.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return err
	}
	// Owned as the directory is (the user PostgreSQL runs as).
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		return os.Chown(signal, int(st.Uid), int(st.Gid))
	}
	return nil
}

func (c *Cluster) prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Dir = c.Dir
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("give %s to uid %d: %w", path, c.cred.Uid, err)
	}
	return nil
}

// reachable checks that the user PostgreSQL runs as can traverse every
// directory from / down to dir (it is not the caller when that is root).
func (c *Cluster) reachable(dir string) error {
	if c.cred == nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			st, _ := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm()&0o001 == 0 && (st == nil || st.Uid != c.cred.Uid) {
				return fmt.Errorf("PostgreSQL runs as uid %d (it refuses root) and cannot reach %s: %s is not traversable by others (chmod o+x it), or set DATABASE_URL", c.cred.Uid, abs, p)
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// runAs returns the credential to run PostgreSQL with: nil when not root,
// else the postgres user's (or nobody's).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody user exists: PostgreSQL refuses to run as root")
}
