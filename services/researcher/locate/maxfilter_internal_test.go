package locate

import (
	"math/rand/v2"
	"testing"
)

// TestMaxFilter checks the van Herk/Gil-Werman filter against the
// definition (the maximum over ±r, clipped to the frame) for lengths that
// do and do not fill its blocks, radii from 0 to past the length, and ties.
func TestMaxFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := &Fingerprinter{}
	for _, n := range []int{1, 2, 7, 13, 14, 217, 300} {
		for _, r := range []int{0, 1, 2, 6, 10, 400} {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(rng.IntN(20)) // ties on purpose
			}
			dst := make([]float32, n)
			f.maxFilter(dst, src, r)
			for i := range n {
				want := src[i]
				for j := max(0, i-r); j <= min(n-1, i+r); j++ {
					want = max(want, src[j])
				}
				if dst[i] != want {
					t.Fatalf("n=%d r=%d: dst[%d] = %v, the maximum over ±r is %v", n, r, i, dst[i], want)
				}
			}
		}
	}
}
