package locate

import (
	"cmp"
	"context"
	"fmt"
	"math"
	mathbits "math/bits"
	"slices"

	"github.com/archivist/archivist/services/researcher/audio"
)

// Clip is a reference clip: its samples at the analysis rate.
type Clip struct {
	// Name identifies the clip in results.
	Name string
	// Samples are mono at Params.Rate.
	Samples []float32
	// High is the clip's band from 4 to 8 kHz as audio.HighBand makes it
	// (nil where the clip's rate has none): a clip with more of its energy
	// there than in Samples is searched for in the episode's high band
	// too (ReadClip fills it; with Params.Rate 8000 only).
	High []float32
	// HighSpeeds are High as the clip sounds played at each of
	// Params.Speeds, for a clip searched for in the high band (nil: it is
	// searched for there at its own speed only).
	HighSpeeds [][]float32
}

// ReadClip decodes a clip from s (at any rate; s bounds its length, as
// audio.OpenLimited does) whole, at p.Rate. Where s has a high band (audio.HighBand)
// and p.Rate is 8000 it reads that band too, and, if the clip is searched
// for there (most of its energy is), the band as the clip sounds played at
// each of p.Speeds: a tempo change is none of the mirrored band (a tone at
// f played fast is at 8 kHz − 1.02 f there, not 1.02 × (8 kHz − f)), so
// the clip is played fast at audio.HighBandRate first.
func ReadClip(name string, s audio.Stream, p Params) (Clip, error) {
	c := Clip{Name: name}
	if p.Rate != 8000 || !hasHighBand(s.SampleRate()) {
		x, err := audio.ReadAll(audio.Resample(s, p.Rate))
		c.Samples = x
		return c, err
	}
	a, b := audio.Tee(s)
	var wide []float32
	write := func(x []float32) { c.Samples = append(c.Samples, x...) }
	writeWide := func(x []float32) { wide = append(wide, x...) }
	if err := stream(context.Background(), audio.Resample(a, p.Rate), audio.Resample(b, audio.HighBandRate), write, writeWide); err != nil {
		return c, err
	}
	var err error
	if c.High, err = highBand(wide); err != nil || !searchedHigh(c) {
		return c, err
	}
	for _, sp := range p.Speeds {
		fast, err := atSpeed(wide, audio.HighBandRate, sp)
		if err != nil {
			return c, err
		}
		h, err := highBand(fast)
		if err != nil {
			return c, err
		}
		c.HighSpeeds = append(c.HighSpeeds, h)
	}
	return c, nil
}

// highBand is audio.HighBand of samples at audio.HighBandRate.
func highBand(wide []float32) ([]float32, error) {
	hb, _ := audio.HighBand(audio.Samples(wide, audio.HighBandRate))
	return audio.ReadAll(hb)
}

// highShare is how much more energy a clip must have in its high band
// (5.5-9 kHz) than below 4 kHz to be searched for there too: above the analysed band a sound
// competes with little of a bed of speech or music, below it with all of
// it (an alarm ringing at 7.7 kHz keeps 0.1 % of its energy below 4 kHz and
// was missed wherever it played under the bed).
const highShare = 1.0

// Index holds the landmark hashes of a set of clips, by hash. Its
// matchers run one at a time: a speed variant's samples are made in it
// when they are first compared (it holds no lock; the locator starts no
// goroutine).
type Index struct {
	p     Params
	clips []indexedClip
	// has marks the hashes with postings, a bit each (128 KiB), where the
	// episode's hashes are looked up first: most have no posting in an
	// item's index. rank counts the marked hashes below each word of has,
	// and a marked hash's postings are post[start[r]:start[r+1]], r its
	// rank (postings). An item's index holds a few thousand of the
	// million hashes: starts by hash were 4 MiB to clear and a million
	// entries to sum, for every item.
	has    []uint64
	rank   []uint32
	start  []uint32
	post   []posting
	frames int32 // the longest clip, in frames
	// discount is log10 of how many speeds every clip is tried at: each
	// variant is another chance of a coincidence at every place, so a
	// candidate's significance is discounted by it (Bonferroni), and
	// variants bring no more false alarms than one speed did.
	discount float64
	// high indexes the high bands of the clips that have most of their
	// energy there (nil if none), and highOf their indexes here.
	high   *Index
	highOf []int
}

// HighBand tells whether some clip is searched for in the episode's band
// above the analysed band: then the Matcher is given the high band too (Matcher.Stream
// does it, or Matcher.WriteHigh).
func (x *Index) HighBand() bool { return x.high != nil }

type indexedClip struct {
	name string
	// of is the clip this one is a speed variant of (itself for the
	// original), and speed its playback speed.
	of    int
	speed float64
	// scale is how far from its factor its factor is searched
	// (scaleRange), and reach how many frames its decisions wait for
	// (reachOf).
	scale float64
	reach int32

	frames int32
	hashes int
	// n is how many samples the variant has, and wave the samples,
	// made when first needed (samples).
	n    int
	wave *wave
	env  []float32 // band envelopes, frame by frame (Bands per frame)
}

// wave is a variant's samples and the start of its most energetic
// stretch (loudest), made when a candidate of the variant is first
// compared with the episode: a speed variant of a kept print has only
// its length (its samples are the clip's own played at its speed, which
// made, the first time, makes again). Reading every variant's samples
// from its clip's print and scanning them for their loudest stretch, for
// every item, cost more than making again those a candidate compares
// (1,000 known clips at ten variants: 0.92× the CPU; new clips, whose
// prints are written, 0.73×; docs/PERFORMANCE.md).
type wave struct {
	made    func() []float32 // the samples, made (nil once they are)
	samples []float32
	excerpt int
	span    int // excerptLen
}

// waveOf is a wave of samples at p's rate that made makes when first
// needed.
func waveOf(p Params, made func() []float32) *wave {
	return &wave{made: made, span: excerptLen(p)}
}

// waveIn is a wave of samples at hand.
func waveIn(p Params, samples []float32) *wave {
	return waveOf(p, func() []float32 { return samples })
}

// waveWith is a wave of samples at hand whose excerpt is known.
func waveWith(samples []float32, excerpt int) *wave {
	return &wave{samples: samples, excerpt: excerpt}
}

// load makes the samples if they are not yet.
func (w *wave) load() {
	if w.made != nil {
		w.samples = w.made()
		w.excerpt = loudest(w.samples, w.span)
		w.made = nil
	}
}

// samples are the variant's samples (made the first time).
func (ic *indexedClip) samples() []float32 {
	ic.wave.load()
	return ic.wave.samples
}

// excerpt is the start sample of the variant's most energetic stretch
// (excerptLen), where its offset is refined.
func (ic *indexedClip) excerpt() int {
	ic.wave.load()
	return ic.wave.excerpt
}

type posting struct {
	clip uint16
	t    uint16
}

// maxClipSeconds bounds a clip: postings store frames in 16 bits.
const maxClipSeconds = 120

// NewIndex fingerprints the clips, and their variants at Params.Speeds
// (after the originals, which keep their indexes).
func NewIndex(p Params, clips []Clip) (*Index, error) {
	prints := make([]*ClipPrint, len(clips))
	for i, c := range clips {
		cp, err := PrintClip(p, c)
		if err != nil {
			return nil, err
		}
		prints[i] = cp
	}
	return NewIndexOfPrints(p, prints)
}

// ClipPrint is what indexing takes from a clip: the fingerprint of each
// of its variants (as it is and at each of Params.Speeds; and in the high
// band, where it is searched for there). It depends on the clip's audio
// and Params only, so it is computed once per clip (PrintClip) and an
// index of any set of clips built from theirs (NewIndexOfPrints).
type ClipPrint struct {
	// Name identifies the clip in results.
	Name string
	// Low holds the clip as it is, then at each of Params.Speeds.
	Low []VariantPrint
	// High holds its high band likewise, or nothing where the clip is
	// not searched for there (searchedHigh); or only the band as it is
	// where the clip had no variants made there.
	High []VariantPrint
}

// VariantPrint is one variant's fingerprint.
type VariantPrint struct {
	// Speed is the variant's playback speed (1: the clip as it is).
	Speed float64
	// Samples are its samples at Params.Rate, Length of them. A speed
	// variant of the low band decoded from a kept print has none (its
	// samples are the clip's own played at Speed: an index of the print
	// makes them again when a candidate of it is compared).
	Samples []float32
	Length  int
	// Hashes are its landmarks, of every shift (Params.Shifts) for speed
	// 1, and Landmarks how many of them the first shift made.
	Hashes    []Hash
	Landmarks int
	// Env are the band envelopes of its frames (Bands a frame).
	Env []float32
}

// PrintClip fingerprints a clip's variants (the work of indexing it).
func PrintClip(p Params, c Clip) (*ClipPrint, error) {
	if len(c.Samples) > maxClipSeconds*p.Rate {
		// The clip's own fault, permanent: it fails alone.
		return nil, fmt.Errorf("locate: clip %s: %w", c.Name, &audio.LimitError{Bound: "clip duration",
			Limit: fmt.Sprintf("%d s", maxClipSeconds), Got: fmt.Sprintf("%.1f s", float64(len(c.Samples))/float64(p.Rate))})
	}
	cp := &ClipPrint{Name: c.Name, Low: []VariantPrint{printVariant(p, c.Samples, 1, true)}}
	for _, sp := range p.Speeds {
		if sp <= 0.5 || sp >= 2 || sp == 1 {
			return nil, fmt.Errorf("locate: speed %g: variants are between 0.5 and 2, and not 1", sp)
		}
		fast, err := atSpeed(c.Samples, p.Rate, sp)
		if err != nil {
			return nil, fmt.Errorf("locate: clip %s at speed %g: %w", c.Name, sp, err)
		}
		cp.Low = append(cp.Low, printVariant(p, fast, sp, false))
	}
	if p.Rate == 8000 && searchedHigh(c) {
		cp.High = []VariantPrint{printVariant(p, c.High, 1, true)}
		if len(c.HighSpeeds) == len(p.Speeds) {
			for k, sp := range p.Speeds {
				cp.High = append(cp.High, printVariant(p, c.HighSpeeds[k], sp, false))
			}
		}
	}
	if cp.longest() > maxClipSeconds*p.Rate {
		return nil, fmt.Errorf("locate: clip %s is longer than %d s", c.Name, maxClipSeconds)
	}
	return cp, nil
}

// printVariant fingerprints a variant: shifted (Params.Shifts) if it is
// the clip as it is (shift); a variant's tempo moves its framing across
// the clip by itself (2 % of 1.2 s is 0.75 hop).
func printVariant(p Params, samples []float32, speed float64, shift bool) VariantPrint {
	v := VariantPrint{Speed: speed, Samples: samples, Length: len(samples)}
	shifts := 1
	if shift {
		shifts = max(p.Shifts, 1)
	}
	for k := range shifts {
		// Framed k·Hop/Shifts samples later: its frame t starts where the
		// clip started t frames earlier, less the shift, so it votes for
		// the clip's own offset (within a frame).
		fp := NewFingerprinter(p, func(h Hash) { v.Hashes = append(v.Hashes, h) })
		if k == 0 {
			fp.Bands = func(_ int32, e []float32) { v.Env = append(v.Env, e...) }
		}
		fp.Write(samples[min(k*p.Hop/shifts, len(samples)):])
		fp.Flush()
		if k == 0 {
			v.Landmarks = len(v.Hashes)
		}
	}
	return v
}

// longest is the most samples any of its variants has.
func (c *ClipPrint) longest() int {
	n := 0
	for _, v := range append(c.Low[:len(c.Low):len(c.Low)], c.High...) {
		n = max(n, v.Length)
	}
	return n
}

// NewIndexOfPrints indexes the clips of the prints: the index NewIndex
// makes of the clips they were made from (in this order).
func NewIndexOfPrints(p Params, prints []*ClipPrint) (*Index, error) {
	var vs []variant
	for i, c := range prints {
		if len(c.Low) != p.variants() {
			return nil, fmt.Errorf("locate: clip %s has %d variants, the parameters %d", c.Name, len(c.Low), p.variants())
		}
		vs = append(vs, variant{c.Name, &c.Low[0], i, &c.Low[0]})
	}
	for k := range p.variants() - 1 {
		for i, c := range prints {
			vs = append(vs, variant{c.Name, &c.Low[1+k], i, &c.Low[0]})
		}
	}
	x, err := newIndex(p, vs)
	if err != nil {
		return nil, err
	}
	return x, x.indexHigh(prints)
}

// variant is a variant's print, of the clip of index of, whose own
// print (as it is) is own.
type variant struct {
	name string
	*VariantPrint
	of  int
	own *VariantPrint
}

// newIndex indexes the variants' landmarks.
func newIndex(p Params, vs []variant) (*Index, error) {
	for _, c := range vs {
		if c.Length > maxClipSeconds*p.Rate {
			return nil, fmt.Errorf("locate: clip %s is longer than %d s", c.name, maxClipSeconds)
		}
	}
	if len(vs) > 1<<16 {
		return nil, fmt.Errorf("locate: %d clips and variants, at most %d", len(vs), 1<<16)
	}
	x := &Index{p: p, has: make([]uint64, 1<<HashBits/64), rank: make([]uint32, 1<<HashBits/64), discount: math.Log10(float64(p.variants()))}
	for _, c := range vs {
		frames := int32((c.Length + p.Hop - 1) / p.Hop)
		scale := scaleRange(p, c.Speed)
		w := waveIn(p, c.Samples)
		if c.Samples == nil && c.Length > 0 {
			// A speed variant of a kept print: the clip's own samples
			// played at its speed, as PrintClip made them.
			own, speed := c.own.Samples, c.Speed
			w = waveOf(p, func() []float32 {
				x, _ := atSpeed(own, p.Rate, speed) // in memory: cannot fail
				return x
			})
		}
		x.clips = append(x.clips, indexedClip{name: c.name, of: c.of, speed: c.Speed, scale: scale, reach: reachOf(frames, scale), frames: frames, hashes: c.Landmarks,
			n: c.Length, wave: w, env: c.Env})
		x.frames = max(x.frames, frames)
		for _, h := range c.Hashes {
			x.has[h.H/64] |= 1 << (h.H % 64)
		}
	}
	var n uint32
	for w, bits := range x.has {
		x.rank[w] = n
		n += uint32(mathbits.OnesCount64(bits))
	}
	x.start = make([]uint32, n+1)
	for _, c := range vs {
		for _, h := range c.Hashes {
			x.start[x.rankOf(h.H)+1]++
		}
	}
	for r := 1; r < len(x.start); r++ {
		x.start[r] += x.start[r-1]
	}
	x.post = make([]posting, x.start[n])
	// Each hash's postings in place, start[r] its next free slot: after,
	// start[r] is where the next hash's begin, and moves up a slot.
	for i, c := range vs {
		for _, h := range c.Hashes {
			r := x.rankOf(h.H)
			x.post[x.start[r]] = posting{clip: uint16(i), t: uint16(h.T)}
			x.start[r]++
		}
	}
	copy(x.start[1:], x.start[:n])
	x.start[0] = 0
	// By clip and frame within a hash: a landmark's shifts side by side
	// (Matcher.vote counts them once).
	for r := range n {
		if ps := x.post[x.start[r]:x.start[r+1]]; len(ps) > 1 {
			slices.SortFunc(ps, func(a, b posting) int {
				return cmp.Or(cmp.Compare(a.clip, b.clip), cmp.Compare(a.t, b.t))
			})
		}
	}
	return x, nil
}

// rankOf is how many marked hashes (has) lie below h.
func (x *Index) rankOf(h uint32) uint32 {
	w := h / 64
	return x.rank[w] + uint32(mathbits.OnesCount64(x.has[w]&(1<<(h%64)-1)))
}

// postings are hash h's postings (none where h is not marked): has's
// word read once, on the matcher's path for every hash of an episode.
func (x *Index) postings(h uint32) []posting {
	w, bit := h/64, uint64(1)<<(h%64)
	bits := x.has[w]
	if bits&bit == 0 {
		return nil
	}
	r := x.rank[w] + uint32(mathbits.OnesCount64(bits&(bit-1)))
	return x.post[x.start[r]:x.start[r+1]]
}

// indexHigh indexes the high band of the clips searched for there
// (searchedHigh), with their variants. The high band is as many more
// chances of a coincidence for the clip as it has speeds, and its
// significance is discounted for all of them.
func (x *Index) indexHigh(prints []*ClipPrint) error {
	if x.p.Rate != 8000 {
		return nil
	}
	var vs []variant
	for i, c := range prints {
		if len(c.High) > 0 {
			vs = append(vs, variant{c.Name, &c.High[0], len(x.highOf), &c.High[0]})
			x.highOf = append(x.highOf, i)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	p := x.p
	for k := range p.Speeds {
		for j, i := range x.highOf {
			if c := prints[i]; len(c.High) == 1+len(p.Speeds) {
				vs = append(vs, variant{c.Name, &c.High[1+k], j, &c.High[0]})
			}
		}
	}
	h, err := newIndex(p, vs)
	if err != nil {
		return fmt.Errorf("locate: the high band: %w", err)
	}
	h.discount = math.Log10(float64(2 * (1 + len(p.Speeds)))) // both bands, every speed
	x.high = h
	return nil
}

// variants is how many variants of a clip the low band indexes: the clip
// as it is and at each speed.
func (p Params) variants() int { return 1 + len(p.Speeds) }

// searchedHigh tells whether c is searched for in the high band too.
func searchedHigh(c Clip) bool {
	return c.High != nil && energy(c.High) > highShare*energy(c.Samples)
}

func energy(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

// excerptLen is the stretch of a clip used to refine an offset: 2 s.
func excerptLen(p Params) int { return 2 * p.Rate }

// loudest is the start of the n-sample stretch of x with the most energy.
func loudest(x []float32, n int) int {
	if len(x) <= n {
		return 0
	}
	var e float64
	for _, v := range x[:n] {
		e += float64(v) * float64(v)
	}
	best, bestE := 0, e
	for i := n; i < len(x); i++ {
		e += float64(x[i])*float64(x[i]) - float64(x[i-n])*float64(x[i-n])
		if e > bestE {
			best, bestE = i-n+1, e
		}
	}
	return best
}

// atSpeed is x (at rate) played at speed: resampled as if it had been
// recorded at rate × speed, so it lasts 1/speed as long, every pitch
// speed times higher.
func atSpeed(x []float32, rate int, speed float64) ([]float32, error) {
	return audio.ReadAll(audio.Resample(audio.Samples(x, int(math.Round(float64(rate)*speed))), rate))
}
