// Package locatetest makes audio for tests and benchmarks of the clip
// locator: synthetic jingles, a bed to bury them in, and WAV files.
package locatetest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
)

// Jingle is seconds of a random melody at rate: notes of 60-250 ms between
// 200 Hz and 3 kHz with two harmonics and a decaying envelope, so that no
// two jingles from different seeds share much.
func Jingle(seed uint64, seconds float64, rate int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	return notes(seconds, rate, 4, func() (float64, float64) {
		return 200 * math.Pow(15, rng.Float64()), 0.06 + 0.19*rng.Float64()
	}, func(f, t float64) float64 {
		return math.Sin(2*math.Pi*f*t) + 0.5*math.Sin(4*math.Pi*f*t) + 0.25*math.Sin(6*math.Pi*f*t)
	})
}

// Ring is seconds of a ringing at rate: notes of 50-150 ms between 6 and
// 8 kHz, pure tones, nothing below 4 kHz (as an alarm clock's ring at
// 7.7 kHz): a sound above the band the landmarks are taken from.
func Ring(seed uint64, seconds float64, rate int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	return notes(seconds, rate, 3, func() (float64, float64) {
		return 6000 + 2000*rng.Float64(), 0.05 + 0.1*rng.Float64()
	}, func(f, t float64) float64 { return math.Sin(2 * math.Pi * f * t) })
}

// notes is seconds of notes at rate, one after another: next gives each
// one's frequency and length in seconds, voice its waveform at a time,
// and each decays as exp(−decay) over its length, at a level of 0.3.
func notes(seconds float64, rate int, decay float64, next func() (f, length float64), voice func(f, t float64) float64) []float32 {
	out := make([]float32, int(seconds*float64(rate)))
	for i := 0; i < len(out); {
		f, length := next()
		l := int(length * float64(rate))
		for j := 0; j < l && i+j < len(out); j++ {
			env := math.Exp(-decay * float64(j) / float64(l))
			out[i+j] = float32(0.3 * env * voice(f, float64(j)/float64(rate)))
		}
		i += l
	}
	return out
}

// Bed is seconds of background at rate: other melodies at a lower level and
// noise, what an episode's talk and music give the locator to ignore.
func Bed(seed uint64, seconds float64, rate int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := Jingle(seed+1<<32, seconds, rate)
	var lp float64
	for i := range out {
		lp = 0.9*lp + 0.1*rng.NormFloat64()
		out[i] = 0.5*out[i] + float32(0.05*lp)
	}
	return out
}

// Insert mixes clip into episode at sample at, scaled by gain.
func Insert(episode, clip []float32, at int, gain float32) {
	for i, v := range clip {
		if at+i < len(episode) {
			episode[at+i] += gain * v
		}
	}
}

// AtTempo plays x (at 8 kHz) at tempo with its pitch kept, as sox's tempo
// effect does (WSOLA: 82 ms frames laid down under a Hann window, each
// taken from the input at tempo times its place in the output, moved by up
// to 14 ms to where it best continues the frame before).
func AtTempo(x []float32, tempo float64) []float32 {
	const n, hs, tol = 656, 328, 112
	outLen := int(math.Round(float64(len(x)) / tempo))
	y, norm := make([]float32, outLen+n), make([]float32, outLen+n)
	at := func(i int) float32 {
		if i < 0 || i >= len(x) {
			return 0
		}
		return x[i]
	}
	prev := 0
	for k := 0; k*hs < outLen; k++ {
		nominal := int(math.Round(float64(k*hs) * tempo))
		from := nominal
		if k > 0 {
			best := math.Inf(-1)
			for d := -tol; d <= tol; d++ {
				var c float64
				for i := 0; i < n; i += 4 {
					c += float64(at(prev+hs+i)) * float64(at(nominal+d+i))
				}
				if c > best {
					best, from = c, nominal+d
				}
			}
		}
		for i := range n {
			w := float32(0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/n))
			y[k*hs+i] += w * at(from+i)
			norm[k*hs+i] += w
		}
		prev = from
	}
	for i := range outLen {
		if norm[i] > 1e-3 {
			y[i] /= norm[i]
		}
	}
	return y[:outLen]
}

// WAVHeader is the 44-byte header of a PCM WAV declaring channels, rate,
// bits per sample and dataBytes of samples: whatever they are, so that
// tests can declare what no real file would (65,535 channels, 4 GHz).
func WAVHeader(channels, rate, bits, dataBytes uint32) []byte {
	b := make([]byte, 44)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], 36+dataBytes)
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], uint16(channels))
	binary.LittleEndian.PutUint32(b[24:], rate)
	binary.LittleEndian.PutUint32(b[28:], rate*channels*bits/8)
	binary.LittleEndian.PutUint16(b[32:], uint16(channels*bits/8))
	binary.LittleEndian.PutUint16(b[34:], uint16(bits))
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], dataBytes)
	return b
}

// WAV is samples as a mono 16-bit PCM WAV file.
func WAV(samples []float32, rate int) []byte {
	var b bytes.Buffer
	WriteWAV(&b, samples, rate)
	return b.Bytes()
}

// WriteWAV writes mono 16-bit PCM.
func WriteWAV(w io.Writer, samples []float32, rate int) error {
	bw := bufio.NewWriter(w)
	bw.Write(WAVHeader(1, uint32(rate), 16, uint32(len(samples)*2)))
	var b [2]byte
	for _, v := range samples {
		x := math.Max(-1, math.Min(1, float64(v)))
		binary.LittleEndian.PutUint16(b[:], uint16(int16(x*32767)))
		bw.Write(b[:])
	}
	return bw.Flush()
}
