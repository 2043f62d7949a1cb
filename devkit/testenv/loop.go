package testenv

import (
	"context"
	"sync"
	"testing"
)

// Go runs loop (a service's loop: a leadership, a daemon) in a goroutine
// until the returned stop is called or the test ends, whichever is first;
// stop waits for loop to return, and an error it returns fails the test.
// Calling stop and then Go again is how a test ends a leadership and
// begins another.
func Go(t testing.TB, loop func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := loop(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("testenv: loop: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
