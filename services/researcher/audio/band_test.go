package audio_test

import (
	"io"
	"math"
	"slices"
	"testing"

	"github.com/archivist/archivist/services/researcher/audio"
)

// toneLevel is the RMS of x's component at freq (rate), by correlation.
func toneLevel(x []float32, rate int, freq float64) float64 {
	var c, s float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / float64(rate)
		c += float64(v) * math.Cos(w)
		s += float64(v) * math.Sin(w)
	}
	return math.Hypot(c, s) / float64(len(x)) * math.Sqrt2
}

// TestHighBandMirrorsTheBandAboveFiveKilohertz: a 6.5 kHz tone at 44.1 kHz
// comes out of the high band at 2.5 kHz with its level, 7.85 kHz (an
// alarm's 7.7 kHz ring 2 % fast) at 1.15 kHz; a 1 or 3 kHz tone (the
// telephone band, which the ordinary resampling keeps) is attenuated by at
// least 50 dB; the output is at 8 kHz and lasts as long as the input.
func TestHighBandMirrorsTheBandAboveFiveKilohertz(t *testing.T) {
	const rate, n = 44100, 44100
	for _, tc := range []struct {
		in, out float64
		keep    bool
	}{{6500, 2500, true}, {7850, 1150, true}, {1000, 8000, false}, {3000, 6000, false}} {
		hb, ok := audio.HighBand(audio.Samples(sine(rate, tc.in, n), rate))
		if !ok {
			t.Fatal("44.1 kHz has a high band")
		}
		y, err := audio.ReadAll(hb)
		if err != nil {
			t.Fatal(err)
		}
		if hb.SampleRate() != 8000 || math.Abs(float64(len(y))-8000) > 2 {
			t.Fatalf("%g Hz: %d samples at %d Hz, want 8000 at 8000", tc.in, len(y), hb.SampleRate())
		}
		mid := y[1000:7000] // away from the filters' edges
		want := 0.5 / math.Sqrt2
		if tc.keep {
			if got := toneLevel(mid, 8000, tc.out); math.Abs(got-want) > 0.05*want {
				t.Errorf("%g Hz: level at %g Hz %.4f, want %.4f", tc.in, tc.out, got, want)
			}
		} else if got := rms(mid); got > want*math.Pow(10, -50.0/20) {
			t.Errorf("%g Hz: %.1f dB left in the high band, want below −50 dB", tc.in, 20*math.Log10(got/want))
		}
	}
	if _, ok := audio.HighBand(audio.Samples(sine(8000, 1000, 800), 8000)); ok {
		t.Error("8 kHz audio has no band above 4 kHz")
	}
}

// TestTeeGivesBothReadersEverySample, read in steps of different sizes,
// with the source's end passed to both.
func TestTeeGivesBothReadersEverySample(t *testing.T) {
	in := sine(16000, 440, 100_003)
	a, b := audio.Tee(audio.Samples(slices.Clone(in), 16000))
	if a.SampleRate() != 16000 || b.SampleRate() != 16000 {
		t.Fatal("rate not passed on")
	}
	var ga, gb []float32
	bufA, bufB := make([]float32, 1000), make([]float32, 3333)
	var doneA, doneB bool
	for !doneA || !doneB {
		if !doneA {
			n, err := a.Read(bufA)
			ga = append(ga, bufA[:n]...)
			doneA = err == io.EOF
		}
		for !doneB && len(gb) < len(ga) {
			n, err := b.Read(bufB)
			gb = append(gb, bufB[:n]...)
			doneB = err == io.EOF
		}
		if doneA && !doneB {
			n, err := b.Read(bufB)
			gb = append(gb, bufB[:n]...)
			doneB = err == io.EOF
		}
	}
	if !slices.Equal(ga, in) || !slices.Equal(gb, in) {
		t.Fatalf("tee: got %d and %d samples, want %d, identical", len(ga), len(gb), len(in))
	}
}

// BenchmarkBands times a minute of 44.1 kHz audio through the ordinary
// resampling to 8 kHz and through HighBand (docs/PERFORMANCE.md: the
// high band's cost).
func BenchmarkBands(b *testing.B) {
	const rate = 44100
	x := make([]float32, 60*rate)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37) * math.Sin(float64(i)*0.0011))
	}
	buf := make([]float32, 1<<14)
	drain := func(s audio.Stream) {
		for {
			if _, err := s.Read(buf); err == io.EOF {
				return
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("resample", func(b *testing.B) {
		for b.Loop() {
			drain(audio.Resample(audio.Samples(x, rate), 8000))
		}
	})
	b.Run("highband", func(b *testing.B) {
		for b.Loop() {
			hb, _ := audio.HighBand(audio.Samples(x, rate))
			drain(hb)
		}
	})
}
