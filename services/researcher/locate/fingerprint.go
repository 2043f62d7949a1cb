package locate

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Params are the analysis settings. The defaults are tuned on a corpus
// built with another seed than the one reported (docs/PERFORMANCE.md).
type Params struct {
	// Rate is the analysis sample rate; everything is resampled to it.
	Rate int
	// FFT is the frame length and Hop the step between frames, in samples.
	FFT, Hop int
	// MinBin and MaxBin bound the spectral bins peaks are taken from.
	MinBin, MaxBin int
	// PeakDF and PeakDT are the half-size of the neighbourhood a peak must
	// dominate, in bins and frames.
	PeakDF, PeakDT int
	// PeaksPerFrame keeps the strongest peaks of each frame.
	PeaksPerFrame int
	// FanOut is how many later peaks each anchor pairs with, within MaxDT
	// frames and MaxDF bins.
	FanOut, MaxDT, MaxDF int
	// Speeds are playback speeds besides 1 at which every clip is also
	// indexed (resampled: pitch and tempo together, as a tape or a
	// broadcast played fast): a clip played 2 % fast is found by its 1.02
	// variant, whose landmarks line up where the original's spread out.
	// Only the strongest variant of a clip is reported at a place.
	Speeds []float64
	// Shifts is how many times every clip is fingerprinted, each time
	// starting Hop/Shifts samples later: an episode's frames fall
	// anywhere within a clip's hop, and landmarks of short or transient
	// sounds, framed half a hop apart, share few hashes (one 1.2 s chime
	// gathered 2 votes framed as the clip was and 61 framed a half hop
	// later). Every shift votes for the same clip. Speed variants are
	// not shifted: their tempo sweeps their framing across the clip.
	Shifts int
}

// DefaultParams analyse at 8 kHz: 64 ms frames every 32 ms, peaks between
// 125 Hz and 3.5 kHz (what survives telephone bandwidth, a 4 kHz low-pass
// and low-rate codecs), paired up to 1 s ahead; every clip is also tried
// 2 % slow and 2 % fast (a broadcast chain's tempo: recall of clips ≥3 s
// played 2 % fast went from 0.18 to 0.96, docs/PERFORMANCE.md).
var DefaultParams = Params{Rate: 8000, FFT: 512, Hop: 256, MinBin: 8, MaxBin: 224,
	PeakDF: 6, PeakDT: 3, PeaksPerFrame: 5, FanOut: 6, MaxDT: 31, MaxDF: 63, Speeds: []float64{0.98, 1.02}, Shifts: 4}

// SpeedStep is the spacing of the speed variants Spanning makes: the
// landmarks of a speed variant match within some 0.5 % of its speed (the
// bins move with the speed), and between two variants the factor is
// searched (Matcher: scaleSearch).
const SpeedStep = 0.02

// Spanning is p with every clip indexed at the playback speeds from
// 1 − speeds to 1 + speeds, SpeedStep apart (speeds 0.02: 0.98 and 1.02,
// as DefaultParams), in place of p's. Tempo changes with the pitch kept
// need no variants up to 10 %: the clip's own landmarks keep their bins,
// and its tempo is searched from where they line up.
func (p Params) Spanning(speeds float64) (Params, error) {
	if speeds < 0 || speeds > 0.3 {
		return p, fmt.Errorf("locate: a speed range of %g: between 0 and 0.3", speeds)
	}
	p.Speeds = nil
	for k := 1; float64(k)*SpeedStep <= speeds+1e-9; k++ {
		f := math.Round(float64(k)*SpeedStep*1000) / 1000
		p.Speeds = append(p.Speeds, 1-f, 1+f)
	}
	slices.Sort(p.Speeds)
	return p, nil
}

// FrameDuration is the hop in seconds.
func (p Params) FrameDuration() float64 { return float64(p.Hop) / float64(p.Rate) }

// Peak is a spectral peak: frame, bin and power.
type Peak struct {
	T int32
	F int16
	V float32
}

// Hash is a landmark: a pair of peaks hashed by the anchor's bin, the
// target's bin offset and their time difference, at the anchor's frame.
type Hash struct {
	H uint32
	T int32
}

// Bands is how many bands the envelope of a frame has: what whole clips are
// compared by once their landmarks have voted.
const Bands = 24

// HashBits is the size of the hash space.
const HashBits = 20

func (p Params) hash(a, b Peak) uint32 {
	df := int(b.F) - int(a.F) + 64
	dt := int(b.T - a.T)
	return uint32(a.F)<<12 | uint32(df&127)<<5 | uint32(dt&31)
}

// Fingerprinter turns samples into landmark hashes as they stream in.
// Hashes come out in order of their anchor frame.
type Fingerprinter struct {
	p      Params
	fft    *fourier.FFT
	window []float64
	frame  []float64
	coef   []complex128
	pend   []float32 // samples not yet framed
	t      int32     // next frame index
	spec   [][]float32
	fmax   [][]float32
	pairer
	// Bands, when set, receives each frame's band envelope (Bands values).
	Bands func(t int32, env []float32)
	// Peaks, when set, receives each frame's peaks as they are picked,
	// frame after frame from the first, in the order they pair in.
	Peaks func(t int32, peaks []Peak)
	env   []float32
	done  int32     // frames whose peaks are final
	g, h  []float32 // maxFilter's block maxima
}

// NewFingerprinter makes a fingerprinter that calls emit for every hash.
func NewFingerprinter(p Params, emit func(Hash)) *Fingerprinter {
	f := &Fingerprinter{p: p, fft: fourier.NewFFT(p.FFT), window: make([]float64, p.FFT),
		frame: make([]float64, p.FFT), coef: make([]complex128, p.FFT/2+1), pairer: pairer{p: p, emit: emit}}
	for i := range f.window {
		f.window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(p.FFT))
	}
	return f
}

// Frames is how many frames have been analysed.
func (f *Fingerprinter) Frames() int32 { return f.t }

// Write analyses samples.
func (f *Fingerprinter) Write(samples []float32) {
	f.pend = append(f.pend, samples...)
	n := 0
	for n+f.p.FFT <= len(f.pend) {
		f.analyse(f.pend[n : n+f.p.FFT])
		n += f.p.Hop
	}
	f.pend = append(f.pend[:0], f.pend[n:]...)
}

// Flush analyses the last partial frames (zero-padded) and emits every
// remaining hash.
func (f *Fingerprinter) Flush() {
	if len(f.pend) > 0 {
		f.Write(make([]float32, f.p.FFT-f.p.Hop))
		f.pend = f.pend[:0]
	}
	for f.done < f.t {
		f.pick(f.done)
		f.done++
	}
	f.pair(math.MaxInt32)
}

func (f *Fingerprinter) analyse(x []float32) {
	for i, v := range x {
		f.frame[i] = float64(v) * f.window[i]
	}
	f.fft.Coefficients(f.coef, f.frame)
	nb := f.p.MaxBin - f.p.MinBin + 1
	var s []float32
	if len(f.spec) > 2*f.p.PeakDT+1 {
		s = f.spec[0]
		f.spec = f.spec[1:]
		m := f.fmax[0]
		f.fmax = f.fmax[1:]
		f.fmax = append(f.fmax, m)
	} else {
		s = make([]float32, nb)
		f.fmax = append(f.fmax, make([]float32, nb))
	}
	// Power, not its log: peaks are picked by comparisons alone, which
	// the log does not change (minPower is the floor a peak must pass).
	for i := range nb {
		c := f.coef[f.p.MinBin+i]
		s[i] = float32(real(c)*real(c) + imag(c)*imag(c))
	}
	f.spec = append(f.spec, s)
	// The maximum over ±PeakDF bins, by a sliding window.
	f.maxFilter(f.fmax[len(f.fmax)-1], s, f.p.PeakDF)
	if f.Bands != nil {
		if f.env == nil {
			f.env = make([]float32, Bands)
		}
		per := nb / Bands
		for b := range Bands {
			var e float64
			for _, c := range f.coef[f.p.MinBin+b*per : f.p.MinBin+(b+1)*per] {
				e += real(c)*real(c) + imag(c)*imag(c)
			}
			f.env[b] = float32(math.Log(e + 1e-6))
		}
		f.Bands(f.t, f.env)
	}
	f.t++
	// Frame t−PeakDT now has its neighbours on both sides.
	if c := f.t - 1 - int32(f.p.PeakDT); c >= 0 && c >= f.done {
		f.pick(c)
		f.done = c + 1
		f.pair(c - int32(f.p.MaxDT))
	}
}

// minPower is the least power of a frame's bin that can be a peak (about e^−20:
// silence and dither are not landmarks).
const minPower = 2e-9

// maxFilter writes to dst the maximum of src (powers, never negative)
// over ±r, by the van Herk/Gil-Werman method: src padded with r of −1 on
// each side, the maxima of each block of 2r+1 from its start (g) and from
// its end (h) give every window's in one comparison, whatever r is.
func (f *Fingerprinter) maxFilter(dst, src []float32, r int) {
	n, w := len(src), 2*r+1
	m := n + 2*r
	if cap(f.g) < m {
		f.g, f.h = make([]float32, m), make([]float32, m)
	}
	g, h := f.g[:m], f.h[:m]
	for i := range r {
		g[i], g[m-1-i] = -1, -1
	}
	copy(g[r:], src)
	copy(h, g)
	for lo := 0; lo < m; lo += w {
		hi := min(lo+w, m)
		for i := lo + 1; i < hi; i++ {
			g[i] = max(g[i-1], g[i])
		}
		for i := hi - 2; i >= lo; i-- {
			h[i] = max(h[i+1], h[i])
		}
	}
	// The window of src[i] is padded [i, i+2r]: h of its start, g of its end.
	for i := range n {
		dst[i] = max(h[i], g[i+2*r])
	}
}

// pick finds the peaks of frame t: maxima of their ±PeakDF × ±PeakDT
// neighbourhood, the strongest PeaksPerFrame.
func (f *Fingerprinter) pick(t int32) {
	idx := int(t - (f.t - int32(len(f.spec))))
	if idx < 0 || idx >= len(f.spec) {
		return
	}
	s := f.spec[idx]
	var cand []Peak
	for b, v := range s {
		if v < f.fmax[idx][b] {
			continue
		}
		ok := true
		for j := max(0, idx-f.p.PeakDT); j <= min(len(f.spec)-1, idx+f.p.PeakDT) && ok; j++ {
			if j != idx && (f.fmax[j][b] > v || (j < idx && f.fmax[j][b] == v && f.spec[j][b] == v)) {
				ok = false
			}
		}
		if ok && v > minPower {
			cand = append(cand, Peak{T: t, F: int16(b + f.p.MinBin), V: v})
		}
	}
	if len(cand) > f.p.PeaksPerFrame {
		slices.SortFunc(cand, func(a, b Peak) int {
			if a.V > b.V {
				return -1
			}
			if a.V < b.V {
				return 1
			}
			return 0
		})
		cand = cand[:f.p.PeaksPerFrame]
	}
	if f.Peaks != nil {
		f.Peaks(t, cand)
	}
	f.peaks = append(f.peaks, cand...)
}

// pairer pairs peaks into landmark hashes: the fingerprinter's last step,
// which a replayed print takes again from its peaks.
type pairer struct {
	p     Params
	peaks []Peak // peaks not yet used as anchors
	emit  func(Hash)
}

// pair emits the hashes of every anchor up to frame upTo: its peaks within
// MaxDT frames are all known.
func (f *pairer) pair(upTo int32) {
	n := 0
	for n < len(f.peaks) && f.peaks[n].T <= upTo {
		a := f.peaks[n]
		fan := 0
		for j := n + 1; j < len(f.peaks) && fan < f.p.FanOut; j++ {
			b := f.peaks[j]
			if b.T == a.T {
				continue
			}
			if b.T-a.T > int32(f.p.MaxDT) {
				break
			}
			if d := int(b.F) - int(a.F); d < -f.p.MaxDF || d > f.p.MaxDF {
				continue
			}
			f.emit(Hash{H: f.p.hash(a, b), T: a.T})
			fan++
		}
		n++
	}
	f.peaks = append(f.peaks[:0], f.peaks[n:]...)
}
