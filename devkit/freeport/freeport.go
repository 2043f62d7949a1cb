// Package freeport hands out TCP ports on 127.0.0.1 for servers that must
// be told their port before they start (a child process, PostgreSQL, a
// service configured by address).
//
// Asking the kernel for port 0 and closing the listener is racy: the port
// comes from the ephemeral range, which outgoing connections draw from too,
// so a busy machine running test packages in parallel hands it to some
// client before the server binds it. Take picks below the ephemeral range,
// where the kernel never assigns ports on its own, and holds a lock file per
// port so that other processes using this package do not pick the same one.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Take returns a port on 127.0.0.1 that is free now and reserved against
// other callers of Take, on this machine, until release is called (or the
// process ends).
func Take() (port int, release func(), err error) {
	lo, hi := span()
	dir := filepath.Join(os.TempDir(), "archivist-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, nil, fmt.Errorf("freeport: %w", err)
	}
	for range 500 {
		p := lo + rand.IntN(hi-lo+1)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, nil, fmt.Errorf("freeport: %w", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			f.Close()
			continue
		}
		l.Close()
		return p, func() { f.Close() }, nil
	}
	return 0, nil, errors.New("freeport: no free port found below the ephemeral range")
}

// span is the range to pick from: the 10,000 ports below the kernel's
// ephemeral range (32768-60999 by default).
func span() (lo, hi int) {
	hi = 32767
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				hi = v - 1
			}
		}
	}
	lo = max(hi-10000, 1024)
	return lo, hi
}
