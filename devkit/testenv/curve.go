package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CurveSizes are the sizes a cost curve is measured at: 10^3, 10^4, ...
// up to top, or to ARCHIVIST_CURVE_MAX when that is lower (a quick run:
// ARCHIVIST_CURVE_MAX=10000).
func CurveSizes(top int) []int {
	if v, err := strconv.Atoi(os.Getenv("ARCHIVIST_CURVE_MAX")); err == nil && v > 0 && v < top {
		top = v
	}
	var out []int
	for n := 1000; n <= top; n *= 10 {
		out = append(out, n)
	}
	return out
}

// CurveName names a curve's point n ("n=1000"), as scripts/curves reads it.
func CurveName(n int) string { return fmt.Sprintf("n=%d", n) }

// ResetPeakRSS starts the process's peak resident set (VmHWM) again from
// what it holds now, so that PeakRSS reads the peak of what follows.
func ResetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// PeakRSS is the process's peak resident set (VmHWM) in bytes.
func PeakRSS(t testing.TB) int64 {
	t.Helper()
	text, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// CPUTime is the process's user and system time so far: what a piece of
// work cost on every core (the garbage collector's and background
// goroutines' included). Benchmarks compare it, never ordinary tests.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportCurve reports a cost curve's point: n items took d, the
// microseconds each, and the peak resident memory since ResetPeakRSS.
func ReportCurve(b *testing.B, n int, d time.Duration) {
	b.Helper()
	b.ReportMetric(d.Seconds(), "s")
	b.ReportMetric(float64(d.Microseconds())/float64(n), "us/item")
	b.ReportMetric(float64(PeakRSS(b))/(1<<20), "peak-MiB")
}
