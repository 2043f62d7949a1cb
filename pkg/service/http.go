package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ServeHTTP serves h on addr until ctx ends, then shuts down within
// timeout. ready is called with the address once it listens (port 0 picks
// one).
func ServeHTTP(ctx context.Context, addr string, h http.Handler, timeout time.Duration, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ready(ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server on %s: %w", addr, err)
		}
		return nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// Loop is a service's background work: it runs until its context ends.
type Loop func(ctx context.Context) error

// Every is a Loop that calls fn every interval (not at once).
func Every(interval time.Duration, fn func(ctx context.Context)) Loop {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				fn(ctx)
			}
		}
	}
}

// Serve runs a service's loops and serves its API on addr, logging
// "<api> listening" and reporting ready once it listens. When the API stops
// (ctx ended, or it could not listen) the loops are cancelled and waited
// for, then each stopper (a subscription's Stop) runs within the shutdown
// timeout. Every error is returned, joined.
func (e *Env) Serve(ctx context.Context, api, addr string, h http.Handler, loops []Loop, stoppers ...func(context.Context) error) error {
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(loops))
	for _, l := range loops {
		go func() { errs <- l(lctx) }()
	}
	err := ServeHTTP(ctx, addr, h, e.ShutdownTimeout, func(a string) {
		e.Log.Info(api+" listening", "addr", a)
		e.Ready()
	})
	stop()
	for range loops {
		err = errors.Join(err, <-errs)
	}
	sctx, cancel := context.WithTimeout(context.Background(), e.ShutdownTimeout)
	defer cancel()
	for _, s := range stoppers {
		err = errors.Join(err, s(sctx))
	}
	return err
}
