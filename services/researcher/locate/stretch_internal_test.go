package locate

import (
	"math"
	"testing"
)

// TestStretchPlaysAtASpeed: tones across the analysed band, resampled to
// speeds 0.9 to 1.1, are the tones at speed times their frequency, as
// long as they play (1/speed), away from the edges: to 50 dB and more up to
// 2.5 kHz, 30 dB at 3.4 kHz (the analysis keeps to 3.5 kHz; the kernel's
// 16 taps roll off there).
func TestStretchPlaysAtASpeed(t *testing.T) {
	const rate = 8000
	for _, f := range []float64{150, 1000, 2500, 3400} {
		for _, speed := range []float64{0.9, 0.951, 1.0037, 1.1} {
			x := make([]float32, 3*rate)
			for i := range x {
				x[i] = float32(math.Sin(2 * math.Pi * f * float64(i) / rate))
			}
			y := stretch(x, speed)
			if want := int(float64(len(x)-1)/speed) + 1; len(y) != want {
				t.Fatalf("%g Hz at %g: %d samples, want %d", f, speed, len(y), want)
			}
			var sig, noise float64
			for i := 64; i < len(y)-64; i++ {
				want := math.Sin(2 * math.Pi * f * speed * float64(i) / rate)
				d := float64(y[i]) - want
				sig += want * want
				noise += d * d
			}
			floor := 50.0
			if f > 3000 {
				floor = 30
			}
			if snr := 10 * math.Log10(sig/noise); snr < floor {
				t.Errorf("%g Hz at speed %g: %.1f dB over the error, want %v and more", f, speed, snr, floor)
			}
		}
	}
}
