package testenv

import (
	"testing"
	"time"
)

// Eventually waits until cond holds, checking it at once and then every
// few milliseconds (backing off to 50 ms), and fails tb, naming what it
// waited for, if it does not hold within timeout: the one way a test
// waits for something to happen instead of sleeping.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for wait := 2 * time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(wait)
	}
}
