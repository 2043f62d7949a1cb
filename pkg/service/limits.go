package service

import (
	"net"
	"sync"

	"golang.org/x/net/netutil"
)

// limitListener bounds ln's connections: at most total open at once
// (further ones wait in the kernel's backlog), and at most perClient from
// one address (further ones are closed at once), so that one client cannot
// take every slot and hold the API from everyone else.
func limitListener(ln net.Listener, total, perClient int) net.Listener {
	return &clientLimited{Listener: netutil.LimitListener(ln, total), per: perClient, open: map[string]int{}}
}

type clientLimited struct {
	net.Listener
	per  int
	mu   sync.Mutex
	open map[string]int // by remote IP
}

func (l *clientLimited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteHost(c)
		l.mu.Lock()
		if l.open[host] >= l.per {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &clientConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.open[host]--; l.open[host] <= 0 {
				delete(l.open, host)
			}
			l.mu.Unlock()
		}}, nil
	}
}

func remoteHost(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
