package audio_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/archivist/archivist/services/researcher/audio"

	"github.com/archivist/archivist/devkit/testenv"
)

func sine(rate int, freq float64, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(0.5 * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return out
}

func rms(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(x)))
}

func resampled(t *testing.T, in []float32, from, to int) []float32 {
	out, err := audio.ReadAll(audio.Resample(audio.Samples(in, from), to))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResampleKeepsTheBandAndRejectsAliases: a tone in the passband keeps
// its level; a tone above the new Nyquist (which a plain interpolator folds
// back into the band) is attenuated by at least 50 dB; the length is the
// input's duration at the new rate.
func TestResampleKeepsTheBandAndRejectsAliases(t *testing.T) {
	for _, from := range []int{44100, 48000, 22050, 16000, 11025} {
		n := from * 2
		pass := resampled(t, sine(from, 1000, n), from, 8000)
		if want := 16000; len(pass) < want-1 || len(pass) > want+1 {
			t.Errorf("%d Hz: %d samples out, want %d", from, len(pass), want)
		}
		if r := rms(pass[1000 : len(pass)-1000]); math.Abs(r-0.5/math.Sqrt2) > 0.01 {
			t.Errorf("%d Hz: 1 kHz tone rms %.4f, want %.4f", from, r, 0.5/math.Sqrt2)
		}
		if from/2 > 5000 {
			alias := resampled(t, sine(from, 5000, n), from, 8000) // would fold to 3 kHz
			if db := 20 * math.Log10(rms(alias[1000:len(alias)-1000])/(0.5/math.Sqrt2)); db > -50 {
				t.Errorf("%d Hz: a 5 kHz tone comes out at %.1f dB, want below -50", from, db)
			}
		}
	}
	// Upsampling keeps the tone too.
	if r := rms(resampled(t, sine(8000, 1000, 16000), 8000, 11025)[1000:20000]); math.Abs(r-0.5/math.Sqrt2) > 0.01 {
		t.Errorf("8000->11025: rms %.4f", r)
	}
}

// TestResampleIsAligned: a click at input time T comes out at output time
// T: the filters' delay is compensated.
func TestResampleIsAligned(t *testing.T) {
	for _, from := range []int{44100, 22050, 48000} {
		in := make([]float32, from)
		at := from / 3
		in[at] = 1
		out := resampled(t, in, from, 8000)
		best := 0
		for i := range out {
			if math.Abs(float64(out[i])) > math.Abs(float64(out[best])) {
				best = i
			}
		}
		want := float64(at) * 8000 / float64(from)
		if math.Abs(float64(best)-want) > 1 {
			t.Errorf("%d Hz: click at output sample %d, want %.1f", from, best, want)
		}
	}
}

func wav(rate, channels int, frames [][]int16) []byte {
	var b bytes.Buffer
	data := len(frames) * channels * 2
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+data))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(channels), uint32(rate), uint32(rate * channels * 2), uint16(channels * 2), uint16(16)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("LIST")
	binary.Write(&b, binary.LittleEndian, uint32(4))
	b.WriteString("INFO")
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(data))
	for _, f := range frames {
		binary.Write(&b, binary.LittleEndian, f)
	}
	return b.Bytes()
}

// TestWAVDownmixes: a stereo 16-bit WAV with an extra chunk is read as the
// mean of its channels.
func TestWAVDownmixes(t *testing.T) {
	s, err := audio.Open(bytes.NewReader(wav(16000, 2, [][]int16{{16384, 0}, {-32768, -32768}, {100, 300}})))
	if err != nil {
		t.Fatal(err)
	}
	got, err := audio.ReadAll(s)
	if err != nil || s.SampleRate() != 16000 {
		t.Fatal(err, s.SampleRate())
	}
	want := []float32{0.25, -1, 200.0 / 32768}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Errorf("sample %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestUnknownFormatIsAnError(t *testing.T) {
	if _, err := audio.Open(bytes.NewReader([]byte("<html>not audio</html>"))); err == nil {
		t.Error("no error for HTML")
	}
}

// lag is the shift of b against a (in samples) that correlates best, in
// [-max, max].
func lag(a, b []float32, maxLag int) int {
	best, bestV := 0, math.Inf(-1)
	for l := -maxLag; l <= maxLag; l++ {
		var s float64
		for i := maxLag; i < len(a)-maxLag && i+l < len(b); i++ {
			s += float64(a[i]) * float64(b[i+l])
		}
		if s > bestV {
			best, bestV = l, s
		}
	}
	return best
}

func decodeFile(t *testing.T, path string) []float32 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := audio.Decode(f, 8000)
	if err != nil {
		t.Fatal(err)
	}
	out, err := audio.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodersAreAligned: the FLAC, 22.05 kHz FLAC and LAME MP3 renderings
// of one episode, decoded and resampled to 8 kHz, line up with the clean
// FLAC within a millisecond: the MP3's encoder delay and padding are
// removed (without that it is 2257 samples, 51 ms, late).
func TestDecodersAreAligned(t *testing.T) {
	dir := filepath.Join(testenv.SharedData(t, "audio/mini", "recorded FLAC, 22 kHz and MP3 renderings of one episode line up when decoded"), "episodes", "ep01")
	clean := decodeFile(t, filepath.Join(dir, "clean.flac"))
	for _, name := range []string{"sr22k.flac", "lp4k_mp3_64k.mp3", "gain-12.flac"} {
		other := decodeFile(t, filepath.Join(dir, name))
		if d := len(other) - len(clean); d < -8 || d > 8 {
			t.Errorf("%s: %d samples, clean has %d", name, len(other), len(clean))
		}
		a, b := clean[:8000*20], other[:8000*20]
		if l := lag(a, b, 800); l < -8 || l > 8 {
			t.Errorf("%s: %d samples (%.1f ms) off the clean episode", name, l, float64(l)/8)
		}
	}
}

// TestVorbis decodes a 1 s stereo 440 Hz Ogg Vorbis tone (made with sox for
// this test) to mono at its rate.
func TestVorbis(t *testing.T) {
	f, err := os.Open("testdata/tone.ogg")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := audio.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	x, err := audio.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if s.SampleRate() != 44100 || len(x) < 44000 || len(x) > 44200 {
		t.Fatalf("%d samples at %d Hz, want 1 s at 44100", len(x), s.SampleRate())
	}
	crossings := 0
	for i := 1; i < len(x); i++ {
		if (x[i-1] < 0) != (x[i] < 0) {
			crossings++
		}
	}
	if crossings < 870 || crossings > 890 {
		t.Errorf("%d zero crossings, want about 880 (440 Hz)", crossings)
	}
	if r := rms(x[1000:40000]); math.Abs(r-0.5/math.Sqrt2) > 0.03 {
		t.Errorf("rms %.3f, want %.3f", r, 0.5/math.Sqrt2)
	}
}
