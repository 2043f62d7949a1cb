// Package fault is Archivist's one failure model (docs/adr/0007-failure-is-a-state.md),
// used by every pipeline: an error is permanent (retrying cannot cure it:
// the unit of work is parked at once, with its reason), transient (retried
// with a backoff that survives redeliveries, leases and claims, bounded by
// time), or an outage of a dependency (PostgreSQL, NATS, the blob store):
// not the work's fault, so it spends no attempt, and every consumer and
// daemon of the service pauses until the dependency answers again (Gate).
//
// Kind classifies any error: a Permanent, Transient or Outage mark wins;
// otherwise the errors of pgx, nats.go and the network are recognised; an
// error nothing recognises is transient, so that nothing parks for a cause
// that was never judged permanent (its budget still bounds it in time).
package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Kind is what a failure says about the work that met it.
type Kind int

const (
	// KindTransient: the work may succeed later; it is retried with backoff
	// until its budget (Policy) runs out.
	KindTransient Kind = iota
	// KindPermanent: retrying cannot cure it; the work is parked at once.
	KindPermanent
	// KindOutage: a dependency of the whole service is down; the work is
	// not at fault, spends no attempt, and the service pauses.
	KindOutage
)

func (k Kind) String() string {
	switch k {
	case KindPermanent:
		return "permanent"
	case KindOutage:
		return "outage"
	default:
		return "transient"
	}
}

// Names of the dependencies an outage can name.
const (
	Postgres  = "postgres"
	NATS      = "nats"
	BlobStore = "blob store"
)

// Error is an error marked with its kind (and, for an outage, the
// dependency that is down).
type Error struct {
	Kind Kind
	// Dependency names what is out (KindOutage), or "".
	Dependency string
	Err        error
}

func (e *Error) Error() string {
	switch {
	case e.Kind == KindOutage && e.Dependency != "":
		return fmt.Sprintf("%s unavailable: %v", e.Dependency, e.Err)
	case e.Kind == KindPermanent:
		return fmt.Sprintf("permanent failure: %v", e.Err)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrPermanent is matched (errors.Is) by every error marked Permanent.
var ErrPermanent = errors.New("permanent failure")

// Is makes errors.Is(err, ErrPermanent) true for a permanent Error.
func (e *Error) Is(target error) bool { return target == ErrPermanent && e.Kind == KindPermanent }

// Permanent marks err as permanent: the work is parked at once with it as
// the reason. nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindPermanent, Err: err}
}

// Transient marks err as transient, overriding what Kind would read in it
// (a missing object that may yet arrive, say).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindTransient, Err: err}
}

// Outage marks err as an outage of dependency.
func Outage(dependency string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindOutage, Dependency: dependency, Err: err}
}

// Of classifies err: the outermost mark wins; then PostgreSQL's, NATS's and
// the network's errors; anything else is transient. nil is transient too
// (callers do not classify success).
func Of(err error) Kind {
	k, _ := classify(err)
	return k
}

// DependencyOf names the dependency an outage error is about ("" when err
// is no outage).
func DependencyOf(err error) string {
	k, dep := classify(err)
	if k != KindOutage {
		return ""
	}
	return dep
}

// IsPermanent reports whether err is permanent.
func IsPermanent(err error) bool { return err != nil && Of(err) == KindPermanent }

// IsOutage reports whether err is an outage of a dependency.
func IsOutage(err error) bool { return err != nil && Of(err) == KindOutage }

func classify(err error) (Kind, string) {
	if err == nil {
		return KindTransient, ""
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind, fe.Dependency
	}
	// PostgreSQL: a server that refuses, shuts down or cannot be reached
	// is out; a serialization failure or deadlock is a transient retry.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, cannot connect now
			pgErr.Code == "53300", // too many connections
			pgErr.Code == "53100": // disk full
			return KindOutage, Postgres
		}
		return KindTransient, ""
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return KindOutage, Postgres
	}
	if errors.Is(err, pgconn.ErrConnClosed) || brokenPgConn(err) {
		return KindOutage, Postgres
	}
	// NATS: no connection, no server answering for JetStream.
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, nats.ErrConnectionDraining):
		return KindOutage, NATS
	}
	return KindTransient, ""
}

// brokenPgConn recognises a PostgreSQL connection that broke under a
// query (the server went away: the pool's next connection will fail to
// connect, which is the outage itself): an error of pgx's connection layer
// wrapping a network failure or an unexpected end of stream.
func brokenPgConn(err error) bool {
	fromPgconn := false
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t := reflect.TypeOf(e); t.Kind() == reflect.Pointer && strings.HasSuffix(t.Elem().PkgPath(), "/pgx/v5/pgconn") {
			fromPgconn = true
			break
		}
	}
	return fromPgconn && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		(isNetworkError(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF))
}

// isNetworkError reports a refused, reset or broken connection.
func isNetworkError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// IsNetwork reports whether err is a network failure (refused, reset,
// broken or timed-out connection, a lookup that failed): a transient fault
// of whatever server was called, an origin's say.
func IsNetwork(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) || isNetworkError(err) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}
