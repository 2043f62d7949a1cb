// Package leader runs a loop in one replica at a time across every
// replica of a service: the replica holding a PostgreSQL session advisory
// lock (leader election). Services reach it through service.Env.AsLeader.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultRetry is how often a replica that does not lead a loop asks
// again, and how often the leader checks that its session is alive.
const DefaultRetry = 5 * time.Second

// Loop is work that runs until ctx ends.
type Loop = func(ctx context.Context) error

// Elect returns loop run as leader: in one replica at a time across
// every replica of a service, the one holding the PostgreSQL session
// advisory lock named by name (the lock goes with its session, so a
// replica that dies or loses the database hands the loop to another
// within a few retries). The others wait, asking again every retry. Loops
// that must run once for the whole deployment (a daily resync, the
// aggregator's merges, the audit schedule) are wrapped in it; their work
// must still be safe to redo, since a new leader may repeat what a dead
// one was doing.
//
// The lock's session is a connection of its own, made with db's settings
// but outside its pool, kept while the replica asks and leads and made
// again when lost: each led loop costs a service one connection beyond
// its pool, and the pool stays whole for the work.
func Elect(db *pgxpool.Pool, name string, retry time.Duration, log *slog.Logger, loop Loop) Loop {
	if retry <= 0 {
		retry = DefaultRetry
	}
	log = log.With("leader_of", name)
	return func(ctx context.Context) error {
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				closeSession(conn)
			}
		}()
		for {
			led, err := false, error(nil)
			if conn == nil || conn.IsClosed() {
				if conn, err = pgx.ConnectConfig(ctx, db.Config().ConnConfig.Copy()); err != nil {
					err = fmt.Errorf("leader lock %s: session: %w", name, err)
				}
			}
			if err == nil {
				led, err = lead(ctx, conn, name, retry, log, loop)
			}
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if led {
					log.WarnContext(ctx, "lost the lead; asking again", "err", err)
				} else {
					log.DebugContext(ctx, "not leading", "err", err)
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
		}
	}
}

// lead takes the lock on conn if it is free and runs loop while it holds
// it: until ctx ends, loop returns, or the lock's session is lost (then
// conn is closed). It reports whether it led.
func lead(ctx context.Context, conn *pgx.Conn, name string, retry time.Duration, log *slog.Logger, loop Loop) (bool, error) {
	key := "archivist.leader." + name
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&mine); err != nil {
		closeSession(conn) // whatever state it is in, the next try starts afresh
		return false, fmt.Errorf("leader lock %s: %w", name, err)
	}
	if !mine {
		return false, nil
	}
	// A leader whose session the server ended (a restart, a terminated
	// backend) learns it at its next check, within two retries (a check
	// times out after one): the new leader waits that long before it
	// starts, so that two never run the loop at once.
	select {
	case <-ctx.Done():
		unlock(conn, key)
		return false, ctx.Err()
	case <-time.After(2 * retry):
	}
	log.InfoContext(ctx, "leading")
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- loop(lctx) }()
	t := time.NewTicker(retry)
	defer t.Stop()
	var lost error
	for lost == nil {
		select {
		case err := <-done:
			unlock(conn, key)
			if err != nil {
				return true, err
			}
			return true, errors.New("the loop returned")
		case <-t.C:
			pctx, pcancel := context.WithTimeout(ctx, retry)
			if err := conn.Ping(pctx); err != nil && ctx.Err() == nil {
				lost = fmt.Errorf("the lock's session: %w", err)
			}
			pcancel()
		case <-ctx.Done():
			lost = ctx.Err()
		}
	}
	// Lost (or stopping): the loop stops before another replica may lead.
	cancel()
	<-done
	if ctx.Err() == nil {
		closeSession(conn) // the session is gone with its lock
	} else {
		unlock(conn, key)
	}
	return true, lost
}

// unlock releases the lock, or closes the session (and with it the lock)
// if it cannot.
func unlock(conn *pgx.Conn, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, key); err != nil {
		closeSession(conn)
	}
}

// closeSession closes a lock's session, within 5 s.
func closeSession(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
