package locate

import (
	"bytes"
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestADPCMDecodesWhatItCoded: the samples the encoder gives back as it
// codes are those its blocks decode to, from any block on, for lengths
// ending anywhere in a block; the blocks are the size adpcmBytes says;
// and the code's noise stays under the signal whatever its level: 12 dB
// under synthetic notes whose aliased harmonics fill the band to 4 kHz (a
// predictor's worst case: real episodes at 8 kHz, clean, noisy, MP3 or GSM,
// have it 21 dB under), 15 dB under a bed at −40 dB.
func TestADPCMDecodesWhatItCoded(t *testing.T) {
	music := locatetest.Jingle(3, 9, 8000)
	quiet := locatetest.Bed(4, 9, 8000)
	for i := range quiet {
		quiet[i] *= 0.01
	}
	for name, c := range map[string]struct {
		x     []float32
		floor float64
	}{"music": {music, 12}, "a quiet bed": {quiet, 15}} {
		x := c.x
		for _, n := range []int{1, 2, 3, adpcmBlock - 1, adpcmBlock, adpcmBlock + 1, adpcmBlock + 2, 5*adpcmBlock + 777, len(x)} {
			var code bytes.Buffer
			var samples int
			e := adpcmEncoder{out: func(b []byte, k int) { code.Write(b); samples += k }}
			dec := make([]float32, n)
			// In uneven writes, as an episode streams.
			for at := 0; at < n; {
				k := min(n-at, 1+at%1000)
				e.code(x[at:at+k], dec[at:at+k])
				at += k
			}
			e.close()
			if samples != n || int64(code.Len()) != adpcmBytes(int64(n)) {
				t.Fatalf("%s, %d samples: %d coded in %d bytes, want %d in %d", name, n, samples, code.Len(), n, adpcmBytes(int64(n)))
			}
			for from := 0; from < n; from += adpcmBlock {
				got := make([]float32, n-from)
				if err := adpcmDecode(got, code.Bytes()[adpcmBytes(int64(from)):]); err != nil {
					t.Fatalf("%s, %d samples from %d: %v", name, n, from, err)
				}
				for i, v := range got {
					if v != dec[from+i] {
						t.Fatalf("%s, %d samples from %d: sample %d decodes to %v, the encoder gave %v", name, n, from, from+i, v, dec[from+i])
					}
				}
			}
			if n == len(x) {
				var sig, noise float64
				for i, v := range x {
					sig += float64(v) * float64(v)
					d := float64(v - dec[i])
					noise += d * d
				}
				if snr := 10 * math.Log10(sig/noise); snr < c.floor {
					t.Errorf("%s: the code's noise is %.1f dB under the signal, want %v and more", name, snr, c.floor)
				} else {
					t.Logf("%s: the code's noise is %.1f dB under the signal", name, snr)
				}
			}
		}
	}
}

// TestADPCMRefusesWhatItNeverWrites: a block cut short or with a header
// the encoder never writes is an error.
func TestADPCMRefusesWhatItNeverWrites(t *testing.T) {
	var code []byte
	e := adpcmEncoder{out: func(b []byte, _ int) { code = append(code, b...) }}
	x := locatetest.Jingle(5, 1, 8000)
	e.code(x, make([]float32, len(x)))
	e.close()
	bad := append([]byte{}, code...)
	bad[2] = 200
	for name, b := range map[string][]byte{"cut short": code[:len(code)-1], "a step index of 200": bad} {
		if err := adpcmDecode(make([]float32, len(x)), b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// BenchmarkADPCMCode: coding an episode's samples as they stream (a
// minute at 8 kHz, in blocks of 2,048 as the Matcher writes them).
func BenchmarkADPCMCode(b *testing.B) {
	x := locatetest.Jingle(3, 60, 8000)
	dec := make([]float32, len(x))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		e := adpcmEncoder{out: func([]byte, int) {}}
		for at := 0; at < len(x); at += 2048 {
			k := min(len(x)-at, 2048)
			e.code(x[at:at+k], dec[at:at+k])
		}
		e.close()
	}
}
