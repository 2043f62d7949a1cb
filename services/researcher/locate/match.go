package locate

import (
	"math"
)

// Occurrence is one place a clip was found.
type Occurrence struct {
	// Clip is the clip's index in the Index.
	Clip int
	// Name is the clip's name.
	Name string
	// Offset is where the clip starts in the episode, in seconds.
	Offset float64
	// Duration is the clip's duration in seconds.
	Duration float64
	// Confidence is between 0 and 1; Threshold and above is reported.
	Confidence float64
	// Votes is how many of the clip's landmarks lined up at this offset,
	// out of Hashes.
	Votes, Hashes int
	// Refined is set when the offset was refined below the frame hop by
	// cross-correlating the waveforms.
	Refined bool
}

// Threshold is the one confidence at and above which an occurrence is
// reported, everywhere.
const Threshold = 0.5

// Matcher streams an episode through an Index. Memory is bounded by the
// longest clip, not by the episode's length.
type Matcher struct {
	x      *Index
	p      Params
	fp     *Fingerprinter
	clips  []clipState
	out    []Occurrence
	report func(Occurrence)
	// The most recent episode samples, for refining offsets.
	ring      []float32
	ringStart int64 // sample index of ring[0]
	ringKeep  int
	frontier  int32
	closedAll int32
	// MinConfidence overrides Threshold (for evaluation: report everything
	// above it to draw precision/recall curves).
	MinConfidence float64
}

type clipState struct {
	votes    []int32 // by offset mod len
	closed   int32   // offsets below this are closed
	prev     [2]int32
	total    int64 // votes at closed offsets
	nClosed  int64
	best     candidate
	haveBest bool
	nms      int32
}

type candidate struct {
	o      int32 // frame offset
	window int32 // votes at o−1..o+1
}

// NewMatcher prepares a matcher; report is called for each occurrence as
// soon as it is decided (nil to collect them for Finish).
func NewMatcher(x *Index, report func(Occurrence)) *Matcher {
	m := &Matcher{x: x, p: x.p, report: report, MinConfidence: Threshold}
	m.clips = make([]clipState, len(x.clips))
	for i, c := range x.clips {
		m.clips[i] = clipState{votes: make([]int32, c.frames+16), closed: -2, nms: max(c.frames-2, 8)}
	}
	m.ringKeep = int(3*x.frames+int32(x.p.MaxDT)+256) * x.p.Hop
	m.fp = NewFingerprinter(x.p, m.vote)
	return m
}

// Write analyses the next samples of the episode (at Params.Rate).
func (m *Matcher) Write(samples []float32) {
	m.ring = append(m.ring, samples...)
	if over := len(m.ring) - m.ringKeep; over > m.ringKeep/4 {
		m.ring = append(m.ring[:0], m.ring[over:]...)
		m.ringStart += int64(over)
	}
	m.fp.Write(samples)
}

// Finish ends the episode and returns every occurrence found, by clip and
// offset.
func (m *Matcher) Finish() []Occurrence {
	m.fp.Flush()
	end := m.fp.Frames()
	for c := range m.clips {
		m.closeUpTo(c, end+2)
		if st := &m.clips[c]; st.haveBest {
			m.decide(c, st.best)
			st.haveBest = false
		}
	}
	return m.out
}

func (m *Matcher) vote(h Hash) {
	if h.T > m.frontier {
		m.frontier = h.T
		// Offsets whose votes are all in: o + frames < frontier.
		for c := range m.clips {
			m.closeUpTo(c, m.frontier-m.x.clips[c].frames-1)
		}
	}
	x := m.x
	for _, p := range x.post[x.start[h.H]:x.start[h.H+1]] {
		o := h.T - int32(p.t)
		st := &m.clips[p.clip]
		if o < st.closed || o < -1 {
			continue
		}
		st.votes[int(o+1)%len(st.votes)]++
	}
}

// closeUpTo closes the clip's offsets below upTo.
func (m *Matcher) closeUpTo(c int, upTo int32) {
	st := &m.clips[c]
	for st.closed < upTo {
		o := st.closed
		st.closed++
		if o < -1 {
			continue
		}
		slot := int(o+1) % len(st.votes)
		k := st.votes[slot]
		st.votes[slot] = 0
		// The chance rate: a mean with real matches clipped out of it.
		mean := (float64(st.total) + priorVotes) / (float64(st.nClosed) + priorOffsets)
		st.total += int64(min(float64(k), 2+4*mean))
		st.nClosed++
		w := st.prev[0] + st.prev[1] + k
		cand := candidate{o: o - 1, window: w}
		st.prev[0], st.prev[1] = st.prev[1], k
		if st.haveBest && o-1-st.best.o >= st.nms {
			m.decide(c, st.best)
			st.haveBest = false
		}
		if w >= minWindowVotes {
			if !st.haveBest || w > st.best.window {
				st.best, st.haveBest = cand, true
			}
		}
	}
}

// debugScores, when set (by tests), sees every candidate's evidence.
var debugScores func(clip string, o int32, votes int, mu float64, hashes int, sig float64)

// The prior of the chance rate: 0.1 votes per offset, worth 200 offsets.
const priorVotes, priorOffsets = 0.1 * 200, 200

// minWindowVotes is the least evidence worth scoring.
const minWindowVotes = 4

// decide scores a candidate and reports it if confident enough.
func (m *Matcher) decide(c int, cd candidate) {
	st := &m.clips[c]
	ic := &m.x.clips[c]
	// Chance votes per offset for this clip against this episode, with a
	// prior for the start of the episode.
	lambda := (float64(st.total) + priorVotes) / (float64(st.nClosed) + priorOffsets)
	conf := confidence(int(cd.window), 3*lambda, ic.hashes)
	if debugScores != nil {
		debugScores(ic.name, cd.o, int(cd.window), 3*lambda, ic.hashes, -poissonTailLog10(int(cd.window), 3*lambda))
	}
	if conf < m.MinConfidence {
		return
	}
	o := Occurrence{Clip: c, Name: ic.name, Duration: float64(len(ic.samples)) / float64(m.p.Rate),
		Confidence: conf, Votes: int(cd.window), Hashes: ic.hashes}
	start := int64(max(cd.o, 0)) * int64(m.p.Hop)
	if s, ok := m.refine(ic, start); ok {
		start, o.Refined = s, true
	}
	o.Offset = float64(max(start, 0)) / float64(m.p.Rate)
	m.out = append(m.out, o)
	if m.report != nil {
		m.report(o)
	}
}

// confidence maps the votes at an offset to [0, 1] by their significance
// against chance: −log10 of the Poisson tail P(X ≥ votes) for the clip's
// mean chance votes mu, through a logistic that is 0.5 at SignificanceAt.
// Real audio repeats itself more than a Poisson process, so the threshold
// sits well above what a multiple-testing bound would ask; it and the
// slope are fitted on a tuning corpus (docs/PERFORMANCE.md).
func confidence(votes int, mu float64, _ int) float64 {
	sig := -poissonTailLog10(votes, mu)
	return 1 / (1 + math.Exp(-(sig-SignificanceAt)/SignificanceSlope))
}

// SignificanceAt is the significance (−log10 of the chance probability) at
// which confidence is 0.5, and SignificanceSlope its scale.
const SignificanceAt, SignificanceSlope = 14, 2.0

// poissonTailLog10 is log10 P(X ≥ k) for X ~ Poisson(mu).
func poissonTailLog10(k int, mu float64) float64 {
	if k <= 0 {
		return 0
	}
	// Sum the terms from k on, in logs; they fall fast once past mu.
	lt := float64(k)*math.Log(mu) - mu - lgamma(float64(k)+1)
	sum := 1.0
	term := 1.0
	for i := k + 1; i < k+200; i++ {
		term *= mu / float64(i)
		sum += term
		if term < 1e-12*sum {
			break
		}
	}
	return (lt + math.Log(sum)) / math.Ln10
}

func lgamma(x float64) float64 { v, _ := math.Lgamma(x); return v }

// refine moves a frame-resolution start (in samples) to the lag, within
// 1.5 hops, where the clip's loudest 2 s correlate best with the episode.
func (m *Matcher) refine(ic *indexedClip, start int64) (int64, bool) {
	n := min(excerptLen(m.p), len(ic.samples)-ic.excerpt)
	if n < m.p.Rate/4 {
		return 0, false
	}
	ex := ic.samples[ic.excerpt : ic.excerpt+n]
	r := int64(m.p.Hop + m.p.Hop/2)
	lo := start + int64(ic.excerpt) - r - m.ringStart
	hi := start + int64(ic.excerpt) + r + int64(n) - m.ringStart
	if lo < 0 || hi > int64(len(m.ring)) {
		return 0, false
	}
	var exE float64
	for _, v := range ex {
		exE += float64(v) * float64(v)
	}
	seg := m.ring[lo:hi]
	best, bestV := int64(0), -1.0
	// Energy of the sliding window of the episode.
	var segE float64
	for _, v := range seg[:n] {
		segE += float64(v) * float64(v)
	}
	for d := int64(0); d <= 2*r; d++ {
		if d > 0 {
			a, b := float64(seg[d-1]), float64(seg[d+int64(n)-1])
			segE += b*b - a*a
		}
		c := float64(dot(ex, seg[d:d+int64(n)]))
		if segE <= 0 || exE <= 0 {
			continue
		}
		v := c / math.Sqrt(segE*exE)
		if v > bestV {
			best, bestV = d, v
		}
	}
	if bestV < 0.05 {
		return 0, false
	}
	return start - r + best, true
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
