package locate

import (
	"cmp"
	"context"
	"io"
	"math"
	mathbits "math/bits"
	"slices"
	"unsafe"

	"github.com/archivist/archivist/services/researcher/audio"
)

// This file is longer than the house's 700 lines on purpose: the matcher
// is one state machine (votes, closing offsets, clusters, decisions,
// verification against the samples, explaining an occurrence away), each
// step reading and changing the state the others keep; split by step,
// every decision would be read across files.

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
	// Similarity is the correlation of the whole clip's band envelopes
	// with the passage's, and Waveform that of their samples (0 where the
	// samples were no longer at hand): how alike the whole clip and the
	// passage are, beyond the landmarks that voted.
	Similarity, Waveform float64
	// Speed is the playback speed the clip was found at: that of the
	// variant (Params.Speeds) that matched, 1 for the clip as it is.
	// Tempo likewise is its tempo with the pitch kept (Params.Tempos).
	// Offset and Duration are in the episode's time, as it played.
	Speed, Tempo float64
}

// Threshold is the one confidence at and above which an occurrence is
// reported, everywhere.
const Threshold = 0.5

// Matcher streams an episode through an Index. Memory is bounded by the
// longest clip, not by the episode's length.
type Matcher struct {
	x     *Index
	p     Params
	fp    *Fingerprinter
	clips []clipState
	// active has a bit set for each clip not idle (clipState.idle): the
	// clips whose offsets are closed as the frames come.
	active []uint64
	out    []Occurrence
	// high searches the episode's high band (audio.HighBand) for the clips indexed
	// there (Index.HighBand), nil if none are.
	high *Matcher
	// The most recent episode samples, for refining offsets, as their
	// code decodes them (enc: adpcm.go).
	ring      []float32
	enc       adpcmEncoder
	envq      [Bands]byte // the frame's band envelopes, quantized
	envAt     []int32     // the episode's frames an envelope correlation reads (envCorr)
	ringStart int64       // sample index of ring[0]
	ringKeep  int
	frontier  int32
	flushedAt int32
	env       []float32 // the episode's band envelopes, by frame mod envKeep
	envKeep   int
	pending   []scored  // decided, waiting for overlapping clips' decisions
	ex2, seg2 []float32 // refine's decimated excerpt and passage
	recent    []scored  // reported, kept while they can explain others
	// MinConfidence overrides Threshold (for evaluation: report everything
	// above it to draw precision/recall curves).
	MinConfidence float64
	// frames is how many frames of the episode have been analysed (the
	// fingerprinter's count, or the replayed print's).
	frames int32
	// rec, when set, records the episode's print as it streams (Record).
	rec *PrintWriter
	// replay, when set, holds the episode's samples in place of ring: the
	// matcher replays a print (Replay).
	replay *sampleWindow
	// Explain, when above 0, has the matcher keep that many of the best
	// refused candidates of each clip, to explain the clips found nowhere
	// (Misses).
	Explain int
	refused map[int][]Refused // by original clip
	// stepEvery closes every clip with votes open offset by offset at
	// every frame, quiet or not (as before quietTo): for tests.
	stepEvery bool
}

type clipState struct {
	votes   []int32 // by offset mod len: the offsets open at once, a reach (indexedClip.reach) and more
	closed  int32   // offsets below this are closed
	open    int64   // votes at offsets not yet closed
	prev    [2]int32
	total   int64 // votes at closed offsets
	nClosed int64
	cluster []candidate // candidates each within nms of the one before
	nms     int32
	hist    []int32 // closed counts by offset mod len: the local background
	// wake is the offset up to which the clip's offsets close quiet (no
	// vote, no window or cluster to decide: quietTo), as of its last
	// close or vote: until its closing passes it, the clip is not stepped.
	wake int32
	// bestW and bestO are the most votes in a window and its offset
	// (kept while the matcher explains its misses).
	bestW, bestO int32
}

// scored is an occurrence with its evidence, in frames.
type scored struct {
	Occurrence
	idx        int // the index's clip (a variant's own, where Clip is its original's)
	sig        float64
	corr       float64 // of the whole clip with the episode at the offset
	wave       float64 // of the clip's samples with the episode's at the offset (0: not at hand)
	projection float64 // of the passage on the clip's samples: the energy of the passage the clip explains
	start, end int32
	pinned     bool // placed by its samples at another factor (pin)
	respeeded  bool // its samples resampled to the speed found (respeed)
	partial    bool // at its variant's factor, its samples match in part only (waveThroughout)
	scaled     bool // decided at another factor than its variant's (scaleSearch)
	repinned   bool // placed at another factor once reported at its variant's (repin)
	// repinCorr is, for one repinned by its band envelopes alone, their
	// similarity with the passage's where they placed it.
	repinCorr float64
	// onLine is, for one placed at another factor than its variant's
	// (scaleSearch, pin or repin; not respeed), how many of the stretches
	// pin looks for are found on its line (onLine).
	onLine int
}

type candidate struct {
	o      int32 // frame offset
	window int32 // votes at o−1..o+1
}

// NewMatcher prepares a matcher for the clips of x.
func NewMatcher(x *Index) *Matcher {
	m := &Matcher{x: x, p: x.p, MinConfidence: Threshold}
	if x.high != nil {
		m.high = NewMatcher(x.high)
	}
	m.clips = make([]clipState, len(x.clips))
	m.active = make([]uint64, (len(x.clips)+63)/64)
	for i, c := range x.clips {
		nms := max(c.frames-2, background)
		m.clips[i] = clipState{votes: make([]int32, c.reach+16), closed: -2, wake: -2, nms: nms, hist: make([]int32, nms+background+8)}
	}
	m.ringKeep = int(5*x.frames+int32(x.p.MaxDT)+256) * x.p.Hop
	m.ring = aligned(m.ringKeep + m.ringKeep/2 + 8) // never grown
	m.fp = NewFingerprinter(x.p, func(h Hash) {
		if m.rec != nil {
			m.rec.hash()
		}
		m.vote(h)
	})
	m.envKeep = int(5*x.frames + 64)
	m.env = make([]float32, m.envKeep*Bands)
	m.fp.Bands = func(t int32, e []float32) {
		quantizeEnv(m.envq[:], e)
		if m.rec != nil {
			m.rec.frame(m.envq[:])
		}
		m.frame(t, m.envq[:])
	}
	m.fp.Peaks = func(_ int32, p []Peak) {
		if m.rec != nil {
			m.rec.peaks(p)
		}
	}
	return m
}

// frame takes frame t's band envelopes (quantizeEnv): the frame is
// analysed.
func (m *Matcher) frame(t int32, q []byte) {
	e := m.env[int(t)%m.envKeep*Bands:][:Bands]
	for i, v := range q[:Bands] {
		e[i] = envOf(v)
	}
	m.frames = t + 1
}

// A frame's band envelopes (natural logs of energy) are kept in a byte
// each, in steps of 1/envScale from envBase: their range, from silence to
// a full-scale band, is −13.8 to 13.3, and the step's error (a 0.036 RMS)
// is far below the envelopes' spread within a clip, which Similarity
// correlates. Streaming and replaying alike use what the bytes say.
const envBase, envScale = -14, 8

// quantizeEnv writes e's bytes to q.
func quantizeEnv(q []byte, e []float32) {
	for i, v := range e[:Bands] {
		q[i] = byte(min(max(math.Round((float64(v)-envBase)*envScale), 0), 255))
	}
}

// envOf is the envelope a byte says.
func envOf(q byte) float32 { return float32(q)/envScale + envBase }

// Write analyses the next samples of the episode (at Params.Rate), in
// any amount: a block longer than a quarter of the samples kept for
// refining is taken a quarter at a time, so that a candidate's samples
// are still at hand when it is decided.
func (m *Matcher) Write(samples []float32) {
	for len(samples) > 0 {
		n := min(len(samples), m.ringKeep/4)
		k := len(m.ring)
		m.ring = m.ring[:k+n] // within its capacity: never grown
		m.enc.code(samples[:n], m.ring[k:])
		if over := len(m.ring) - m.ringKeep; over > m.ringKeep/4 {
			over &^= 3 // ring[0] stays a sample of index 0 mod 4: see aligned
			m.ring = append(m.ring[:0], m.ring[over:]...)
			m.ringStart += int64(over)
		}
		m.fp.Write(samples[:n])
		samples = samples[n:]
	}
}

// WriteHigh analyses the next samples of the episode's high band, as
// audio.HighBand makes it, in step with Write; needed only where
// Index.HighBand, and ignored elsewhere.
func (m *Matcher) WriteHigh(samples []float32) {
	if m.high != nil {
		m.high.MinConfidence, m.high.Explain = m.MinConfidence, m.Explain
		m.high.Write(samples)
	}
}

// Stream reads the episode from s (at any rate) to its end: resampled to
// Params.Rate for Write, and where the index has clips searched for above
// the analysed band (Index.HighBand) and s has that band, its high band for WriteHigh,
// the two read in step from one decode.
func (m *Matcher) Stream(ctx context.Context, s audio.Stream) error {
	if m.high == nil || !hasHighBand(s.SampleRate()) {
		return stream(ctx, audio.Resample(s, m.p.Rate), nil, m.Write, nil)
	}
	a, b := audio.Tee(s)
	hb, _ := audio.HighBand(b)
	return stream(ctx, audio.Resample(a, m.p.Rate), hb, m.Write, m.WriteHigh)
}

// stream reads low to its end, and high (at the same rate, nil if none)
// in step with it, in blocks to write and writeHigh.
func stream(ctx context.Context, low, high audio.Stream, write, writeHigh func([]float32)) error {
	buf := make([]float32, 1<<14)
	var hbuf []float32
	if high != nil {
		hbuf = make([]float32, 1<<14)
	}
	var read, readHigh int64
	highDone := high == nil
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := low.Read(buf)
		write(buf[:n])
		read += int64(n)
		lowDone := err == io.EOF
		if err != nil && !lowDone {
			return err
		}
		for !highDone && (lowDone || readHigh < read) {
			k, herr := high.Read(hbuf[:min(len(hbuf), max(int(read-readHigh), 1<<12))])
			writeHigh(hbuf[:k])
			readHigh += int64(k)
			highDone = herr == io.EOF
			if herr != nil && !highDone {
				return herr
			}
		}
		if lowDone && highDone {
			return nil
		}
	}
}

// Finish ends the episode and returns every occurrence found, by clip and
// offset.
func (m *Matcher) Finish() []Occurrence {
	m.finish()
	if m.high != nil {
		m.mergeHigh(m.high.finish())
	}
	slices.SortFunc(m.out, func(a, b Occurrence) int {
		if a.Clip != b.Clip {
			return a.Clip - b.Clip
		}
		return cmp.Compare(a.Offset, b.Offset)
	})
	return m.out
}

// mergeHigh adds the occurrences found in the high band (their Clip the
// high index's): where the clip was found at the same place in both bands,
// the more confident one stands.
func (m *Matcher) mergeHigh(hs []Occurrence) {
	for _, h := range hs {
		h.Clip = m.x.highOf[h.Clip]
		dup := false
		for i, o := range m.out {
			if o.Clip == h.Clip && math.Abs(o.Offset-h.Offset) < o.Duration/2 {
				dup = true
				if h.Confidence > o.Confidence {
					m.out[i] = h
				}
				break
			}
		}
		if !dup {
			m.out = append(m.out, h)
		}
	}
}

func (m *Matcher) finish() []Occurrence {
	if m.replay == nil {
		m.fp.Flush() // a replayed print holds the flush's frames and peaks
		m.enc.close()
	}
	end := m.frames
	for c := range m.clips {
		m.closeUpTo(c, end+2)
		m.resolve(c)
	}
	m.flush(math.MaxInt32)
	return m.out
}

func (m *Matcher) vote(h Hash) {
	if h.T > m.frontier {
		m.frontier = h.T
		// Offsets whose votes are all in: o + frames < frontier; and,
		// for a clip whose factor is searched, whose passage is analysed
		// at the slowest factor searched (reach).
		// Only the clips with votes open or a cluster undecided: an
		// idle one's offsets close alike, in one step when it next gets a
		// vote (below), not one by one for every clip every frame (with
		// 1,000 clips and ten speed variants, that was a third of the
		// matcher's time). And of those only the ones whose closing
		// reaches an offset with votes, or a window or cluster open: a
		// chance vote keeps a clip open for a reach of frames, its
		// offsets quiet but the one voted for; they close in one step
		// when it is reached, or the clip gets another vote (below).
		for wi, w := range m.active {
			for w != 0 {
				b := mathbits.TrailingZeros64(w)
				w &= w - 1
				c := wi*64 + b
				if upTo := m.frontier - m.x.clips[c].reach - 1; upTo > m.clips[c].wake {
					m.closeUpTo(c, upTo)
				}
				if m.clips[c].idle() {
					m.active[wi] &^= 1 << b
				}
			}
		}
		if m.frontier-m.flushedAt >= 32 {
			m.flush(m.frontier)
			m.flushedAt = m.frontier
		}
	}
	x := m.x
	ps := x.postings(h.H)
	if ps == nil {
		return // no clip has this hash
	}
	// One landmark of the episode votes once for a clip at a place: its
	// shifts (Params.Shifts) hold the same landmark a frame apart at
	// most, and their postings of a hash are next to each other. Counted
	// once, chance votes stay as independent as the landmarks are.
	last, lastO := -1, int32(0)
	for _, p := range ps {
		o := h.T - int32(p.t)
		if c := int(p.clip); c == last && o >= lastO-1 && o <= lastO+1 {
			continue
		}
		last, lastO = int(p.clip), o
		st := &m.clips[p.clip]
		if upTo := m.frontier - x.clips[p.clip].reach - 1; st.closed < upTo {
			m.closeUpTo(int(p.clip), upTo) // idle, or quiet: offsets left to close
		}
		m.active[p.clip/64] |= 1 << (p.clip % 64)
		if o < st.closed || o < -1 {
			continue
		}
		st.votes[int(o+1)%len(st.votes)]++
		st.open++
		st.wake = min(st.wake, o)
	}
}

// idle says a clip has no votes at its open offsets, none in its last
// two closed, and no cluster undecided: closing its offsets changes
// nothing but their count and its background (skipQuiet).
func (st *clipState) idle() bool {
	return st.open == 0 && st.prev == [2]int32{} && len(st.cluster) == 0
}

// quietTo is the first offset from closed on that closing must step
// (closeUpTo's loop): the next with votes, while no window or cluster is
// open (closed itself otherwise); math.MaxInt32 for an idle clip.
func (st *clipState) quietTo() int32 {
	if st.prev != [2]int32{} || len(st.cluster) > 0 {
		return st.closed
	}
	if st.open == 0 {
		return math.MaxInt32
	}
	// The votes open are at offsets closed to closed+len(votes)-1.
	from := max(st.closed, -1)
	i := int(from+1) % len(st.votes)
	for o := from; o < from+int32(len(st.votes)); o++ {
		if st.votes[i] != 0 {
			return o
		}
		if i++; i == len(st.votes) {
			i = 0
		}
	}
	return st.closed
}

// skipQuiet closes the clip's offsets below upTo at once, none of which
// has votes, a window or a cluster open (quietTo): each adds a closed
// offset without votes, as closeUpTo's loop would.
func (st *clipState) skipQuiet(upTo int32) {
	from := max(st.closed, -1)
	st.closed = upTo
	n := int64(upTo - from)
	if n <= 0 {
		return
	}
	st.nClosed += n
	if n >= int64(len(st.hist)) {
		clear(st.hist)
		return
	}
	// hist[(o+1) mod len] for o from from to upTo-1: one or two runs.
	i := int(from+1) % len(st.hist)
	j := i + int(n)
	if j <= len(st.hist) {
		clear(st.hist[i:j])
	} else {
		clear(st.hist[i:])
		clear(st.hist[:j-len(st.hist)])
	}
}

// closeUpTo closes the clip's offsets below upTo.
func (m *Matcher) closeUpTo(c int, upTo int32) {
	st := &m.clips[c]
	q := st.wake // quietTo, kept since the clip's last close and vote
	for {
		if m.stepEvery && q != math.MaxInt32 {
			q = st.closed
		}
		if q > st.closed {
			st.skipQuiet(min(q, upTo))
		}
		if st.closed >= upTo {
			st.wake = q
			return
		}
		o := st.closed
		st.closed++
		if o < -1 {
			q = st.quietTo()
			continue
		}
		slot := int(o+1) % len(st.votes)
		k := st.votes[slot]
		st.votes[slot] = 0
		st.open -= int64(k)
		if k > 0 {
			// The chance rate: a mean with real matches clipped out of it
			// (an offset without votes adds nothing to it).
			mean := (float64(st.total) + priorVotes) / (float64(st.nClosed) + priorOffsets)
			st.total += int64(min(float64(k), 2+4*mean))
		}
		st.nClosed++
		st.hist[int(o+1)%len(st.hist)] = k
		w := st.prev[0] + st.prev[1] + k
		if m.Explain > 0 && w > st.bestW {
			st.bestW, st.bestO = w, o-1
		}
		cand := candidate{o: o - 1, window: w}
		st.prev[0], st.prev[1] = st.prev[1], k
		// A cluster is complete once nothing within nms can join it (nms ≥
		// background: its members' neighbours are all in hist by then).
		if n := len(st.cluster); n > 0 && (o-1-st.cluster[n-1].o >= st.nms || st.cluster[n-1].o-st.cluster[0].o > 2*st.nms) {
			m.resolve(c)
		}
		if w >= minWindowVotes {
			st.cluster = append(st.cluster, cand)
		}
		q = st.quietTo()
	}
}

// The prior of the chance rate: 0.1 votes per offset, worth 200 offsets.
const priorVotes, priorOffsets = 0.1 * 200, 200

// minWindowVotes is the least evidence worth scoring.
const minWindowVotes = 4

// background is how many offsets on each side of a candidate give its
// local chance rate.
const background = 48

// localRate is the mean votes per offset around o (its own ±3 left out),
// the highest tenth dropped: what a sustained tone or a busy passage gives
// every offset nearby, which a whole-episode mean underrates.
func (st *clipState) localRate(o int32) float64 {
	var vals []int32
	for d := -int32(background); d <= background; d++ {
		if (d >= -3 && d <= 3) || o+d < -1 || o+d >= st.closed {
			continue
		}
		vals = append(vals, st.hist[int(o+d+1)%len(st.hist)])
	}
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	vals = vals[:len(vals)-len(vals)/10]
	var sum int64
	for _, v := range vals {
		sum += int64(v)
	}
	return float64(sum) / float64(len(vals))
}

// resolve decides a complete cluster of a clip's candidates. Members that
// are confident are refined; then, most significant first, each is kept
// unless it overlaps one already kept. Between candidates of about equal
// significance the one whose whole clip looks more like the passage wins: a
// clip that repeats itself (a looping ringtone) also gathers votes half a
// loop off, where half the clip lines up with the other half.
func (m *Matcher) resolve(c int) {
	st := &m.clips[c]
	var conf []scored
	for i, cd := range st.cluster {
		// Only a local maximum of the votes (within two offsets) is
		// scored: its neighbours are the same alignment, framed a little
		// off, and each would be refined against the samples again.
		peak := true
		for j := max(i-2, 0); j <= min(i+2, len(st.cluster)-1) && peak; j++ {
			d, w := st.cluster[j].o-cd.o, st.cluster[j].window
			peak = j == i || d < -2 || d > 2 || w < cd.window || (w == cd.window && j > i)
		}
		if !peak {
			continue
		}
		if s, ok := m.decide(c, cd); ok {
			conf = append(conf, s)
		}
	}
	st.cluster = st.cluster[:0]
	// Occurrences of the clip kept from an earlier cluster that overlap
	// these compete with them again.
	keep := m.pending[:0]
	for _, p := range m.pending {
		overlaps := false
		for _, s := range conf {
			if d := s.start - p.start; p.idx == c && d > -st.nms && d < st.nms {
				overlaps = true
				break
			}
		}
		if overlaps {
			conf = append(conf, p)
		} else {
			keep = append(keep, p)
		}
	}
	m.pending = keep
	// Most significant first; within a quarter of each other, the more
	// alike.
	bucket := func(s scored) int { return int(math.Floor(math.Log(s.sig) / math.Log(1.25))) }
	slices.SortStableFunc(conf, func(a, b scored) int {
		if c := cmp.Compare(bucket(b), bucket(a)); c != 0 {
			return c
		}
		return cmp.Compare(b.corr, a.corr)
	})
	// A clip that repeats a beat can gather more votes a beat off its place
	// than at it (the beat goes on in the passage after it, or its
	// landmarks are framed better there); its samples tell the two apart
	// where the landmarks cannot. An overlapping candidate whose samples
	// match clearly better goes first (placedBetter).
	if len(conf) > 1 {
		top, best := conf[0], 0
		for i, s := range conf {
			if d := s.start - top.start; d > -st.nms && d < st.nms && (s.wave > conf[best].wave || s.pinned && !conf[best].pinned || pinsPlaceBetter(s, conf[best])) && placedBetter(s, top) {
				best = i
			}
		}
		if w := conf[best]; best > 0 {
			copy(conf[1:best+1], conf[:best])
			conf[0] = w
		}
	}
	var kept []scored
	for _, s := range conf {
		overlaps := false
		for _, k := range kept {
			if d := s.start - k.start; d > -st.nms && d < st.nms {
				overlaps = true
				break
			}
		}
		if !overlaps {
			kept = append(kept, s)
		}
	}
	m.pending = append(m.pending, kept...)
}

// decide scores a candidate against chance and, if confident, refines it.
func (m *Matcher) decide(c int, cd candidate) (scored, bool) {
	st := &m.clips[c]
	ic := &m.x.clips[c]
	// Chance votes per offset for this clip: the episode-wide rate (with a
	// prior for the start of the episode) or the local one, the higher.
	lambda := (float64(st.total) + priorVotes) / (float64(st.nClosed) + priorOffsets)
	lambda = math.Max(lambda, st.localRate(cd.o))
	sig := -poissonTailLog10(int(cd.window), 3*lambda) - m.x.discount
	landmarks := confidenceOf(sig)
	o := Occurrence{Clip: ic.of, Name: ic.name, Duration: float64(ic.n) / float64(m.p.Rate),
		Votes: int(cd.window), Hashes: ic.hashes, Speed: ic.speed, Tempo: 1}
	if landmarks < min(m.MinConfidence, Threshold, heardAt) {
		m.refuse(c, cd, lambda, o, landmarks, "landmarks")
		return scored{}, false
	}
	o.Similarity = m.similarity(ic, cd.o)
	if landmarks < m.MinConfidence && o.Similarity < plausible {
		// Too few landmarks to report, and the band envelopes do not
		// point at the clip either: not worth comparing the samples.
		m.refuse(c, cd, lambda, o, landmarks, "envelopes")
		return scored{}, false
	}
	start := int64(max(cd.o, 0)) * int64(m.p.Hop)
	startFrame, r := cd.o, 1.0
	var (
		projection float64
		compared   bool
	)
	if s, ok := m.refine(ic, start, int64(m.p.Hop+m.p.Hop/2)); ok {
		start, o.Refined = s, true
	}
	o.Waveform, projection, compared = m.waveCorr(ic, start)
	// Played at a speed or tempo between the variants', a clip's
	// landmarks line up over part of it only, and its start drifts from
	// where they point: where they are certain, the factor and start at
	// which its band envelopes follow the passage's far better than at the
	// variant's factor are its own (scaleSearch), and its samples, played
	// at another factor, are not compared. (Its samples may well match in
	// part: a stretch keeps the waveform within each of its frames, and
	// the samples' refinement aligned the clip's loudest 2 s, not its
	// start. They may even match throughout, a fraction of a second off,
	// where a held chord or a steady beat correlates at any shift of its
	// period: clips of music at tempo 0.95 and 1.05, whose quarters
	// correlated 0.53 and 0.23, 0.46 and 0.48, were reported 0.14-0.21 s
	// off at factor 1. Landmarks short of certain, at a factor found so,
	// were a coincidence as often as not on the tuning corpus.)
	partial := false // its samples match in part only (waveThroughout)
	if sig >= certain && ic.frames >= minScaleFrames && o.Waveform < waveSure {
		throughout := compared && m.waveThroughout(ic, start, o.Waveform)
		partial = compared && !throughout
		// Its samples place it (pin), from the middle of the clip where
		// the envelopes put it (the ridge's pivot): a factor found by
		// the envelopes stands with the samples' start and factor, or
		// its own where the samples do not place it; one that does not
		// fit clearly better than the variant's own stands where the
		// samples place the clip at it too.
		f, sr, sim, at1 := m.scaleSearch(ic, cd.o)
		var (
			pl  pinned
			got bool
		)
		if sr != 1 {
			pl, got = m.pinAt(ic, f, sr, int64(cd.o+ic.reach+1)*int64(m.p.Hop))
		}
		// Where its samples match throughout at the variant's factor,
		// only its samples move it, and only where its envelopes follow
		// the passage better there too: a clip overlaid on another sound,
		// played as it is, its samples 0.56 throughout, fitted its
		// envelopes 0.35 at 0.90 against 0.23 (placed 0.3 s early), and
		// another, its samples 0.82, was placed by them at 1.023 where its
		// envelopes fitted 0.32 against 0.35 (0.13 s late); the clips at
		// tempo 0.95 and 1.05 above were placed by their samples to 6 ms,
		// their envelopes 0.07-0.22 better.
		switch {
		case sr == 1:
		case throughout && (!got || !pl.bySamples || sim < at1+repinGain):
			got = false
		case sim >= at1+scaleGain:
			o.Similarity = sim
			if !got {
				pl, got = pinned{start: int64(f) * int64(m.p.Hop), r: sr}, true
			}
		case got && math.Abs(pl.r-sr) <= pinAgree && math.Abs(pl.r-1) >= minFactor:
			o.Similarity = sim
		default:
			got = false
		}
		if got && pl.bySamples {
			if sh, sim, ok := m.periodOff(ic, pl, int64(cd.o+ic.reach+1)*int64(m.p.Hop)); ok {
				pl, o.Similarity = sh, sim
			}
		}
		if got {
			r, startFrame = pl.r, int32(pl.start/int64(m.p.Hop))
			start, o.Refined, o.Waveform, projection, compared = max(pl.start, 0), pl.bySamples, 0, 0, false
			o.atFactor(ic.speed, r)
		}
	}
	// Played at a speed between two variants', a clip keeps too few of
	// its landmarks to be certain, and its samples do not match at the
	// variant's speed: its samples, resampled to the speed its band
	// envelopes find and placed by their stretches, are compared there
	// (respeed); the speeds tried count against their correlation.
	searched := 0.0
	if r == 1 && ic.speed != 1 && ic.frames >= minScaleFrames && o.Similarity >= respeedFrom && o.Waveform < waveClear {
		if rs, at, w, p, ok := m.respeed(ic, cd.o, int64(cd.o+ic.reach+1)*int64(m.p.Hop)); ok && w > o.Waveform {
			r, startFrame = rs.speed/ic.speed, int32(at/int64(m.p.Hop))
			start, o.Refined, o.Waveform, projection, compared = at, true, w, p, true
			o.Duration = float64(rs.n) / float64(m.p.Rate)
			o.Speed = rs.speed
			searched = respeedTrials
		}
	}
	if o.Similarity < unlike && o.Waveform < unlike {
		// The landmarks lined up, but the whole clip looks like the
		// passage in neither its band envelopes nor its samples: a
		// coincidence of a few landmarks.
		m.refuse(c, cd, lambda, o, landmarks, "unlike")
		return scored{}, false
	}
	// The samples are evidence of their own: a short clip has few
	// landmarks, and under a louder bed fewer of them survive, but where
	// the passage is the clip (mixed in, not re-recorded) its samples
	// still correlate with the clip's far beyond what unrelated audio
	// does.
	if conf := confidenceOf(sig + max(0, waveSignificance(o.Waveform, o.Duration)-searched)); conf < m.MinConfidence {
		m.refuse(c, cd, lambda, o, conf, "confidence")
		return scored{}, false
	}
	// A short clip that repeats itself (a ring, two notes of a chime)
	// can gather as many landmarks a beat off its place as at it, and
	// has too few for the difference to tell: once it is confident, its
	// samples are searched a quarter second either way.
	if ic.n < shortClip*m.p.Rate && r == 1 {
		if s, ok := m.refine(ic, start, int64(placeHops*m.p.Hop)); ok && s != start {
			if w, p, ok := m.waveCorr(ic, s); ok && w > o.Waveform {
				start, o.Refined, o.Waveform, projection = s, true, w, p
			}
		}
	}
	ws := max(0, waveSignificance(o.Waveform, o.Duration)-searched)
	if compared && sig < certain && ws == 0 {
		// Where the clip plays, mixed in however far under a bed, its
		// samples correlate with the passage's beyond what chance gives
		// at the best of the lags tried; where they do not, landmarks
		// short of certain lined up by coincidence (a voice like the
		// clip's, a chord of it), however alike the band envelopes.
		m.refuse(c, cd, lambda, o, landmarks, "samples")
		return scored{}, false
	}
	// A confident clip still at its variant's factor whose samples match
	// in part only (in one of its first and last quarters) was aligned at
	// its loudest 2 s: played at another tempo (or between two speeds),
	// its start lies a fraction of that excerpt's place off. Its samples
	// place it from there (repin), or else its band envelopes; where its
	// samples match throughout (a held chord, a steady beat), its samples
	// alone (a 6.5 s clip of music at tempo 1.05, its samples 0.60 at
	// factor 1 and 0.14 s early, its stretches 12 of 12 on the line at
	// 1.0487 against 9 at 1, placed to 1 ms). It is ranked against the
	// clip's other candidates as it was decided, at its variant's factor,
	// but over one of its own variant whose samples match in part only
	// (placedBetter).
	// So is a clip under minScaleFrames, whose factor its band envelopes
	// do not search, by its samples alone where it is long enough for them
	// (pinnable): 1.9 s clips at tempo 1.10, aligned at factor 1, started
	// 0.09 s early; placed by their samples, to 5 ms.
	// So is one whose samples were not compared, because at its variant's
	// factor it would reach past the episode's end: played faster at an
	// episode's end, it does not (a 6.2 s clip at tempo 1.05 and 1.10,
	// reported 0.2 and 0.5 s early).
	decidedAt, repinned, repinCorr := r, false, 0.0
	if scalable := ic.frames >= minScaleFrames; r == 1 && (scalable || pinnable(m.p, ic.n)) && (!compared || o.Waveform < waveSure) {
		if pl, sim, ok := m.repin(ic, cd.o, start, int64(cd.o+ic.reach+1)*int64(m.p.Hop), scalable && (!compared || !m.waveThroughout(ic, start, o.Waveform))); ok {
			repinned = true
			r, startFrame, start, o.Refined = pl.r, int32(pl.start/int64(m.p.Hop)), max(pl.start, 0), pl.bySamples
			o.atFactor(ic.speed, r)
			if !pl.bySamples {
				repinCorr = sim
			}
		}
	}
	onLine := 0
	if r != 1 && searched == 0 {
		onLine = m.onLine(ic, float64(start), 1/r, int64(cd.o+ic.reach+1)*int64(m.p.Hop))
	}
	o.Offset = float64(max(start, 0)) / float64(m.p.Rate)
	o.Confidence = confidenceOf(sig + ws)
	return scored{Occurrence: o, idx: c, sig: sig, corr: o.Similarity, wave: o.Waveform, projection: projection,
		start: startFrame, end: startFrame + int32(float64(ic.frames)/r), pinned: decidedAt != 1 && o.Refined, respeeded: searched > 0, partial: partial && decidedAt == 1, scaled: decidedAt != 1, repinned: repinned, repinCorr: repinCorr, onLine: onLine}, true
}

// atFactor is o placed at factor r of a variant of speed: its duration as
// it played, and its speed (a speed variant's, which r resamples further)
// or else its tempo.
func (o *Occurrence) atFactor(speed, r float64) {
	o.Duration /= r
	if speed != 1 {
		o.Speed = speed * r
	} else {
		o.Tempo = r
	}
}

// unlike is the correlation below which, in both its band envelopes and
// its samples, a clip does not look like the passage its landmarks point
// at. Fitted on the tuning corpus (SEED=3 of make_corpus.sh, 8 episodes):
// at 0.25 it removed 29 of its 45 false alarms and no true occurrence;
// with Params.Shifts, which brought in true occurrences of few votes
// and coincidences of a few more, 0.30 removed 6 of the 17 false alarms
// left and no true occurrence (of 738 in all conditions, two had both
// below 0.35: 0.30/0.08 and 0.24/0.43).
const unlike = 0.30

// plausible is the least correlation of the band envelopes (Similarity)
// at which a candidate whose landmarks alone are not confident is refined
// and its samples compared: three in four such candidates are below it
// and refining them was most of the matcher's time. Fitted on the tuning
// corpus (SEED=3, 8 episodes, all conditions): of 21,505 such candidates
// 13,448 were below 0.05, and the 26 true occurrences their samples
// brought in had 0.10 and above.
const plausible = 0.05

// heardAt is the least confidence of the landmarks alone at which a
// candidate's samples are compared with the passage's, to be reported
// if they match (waveSignificance): below it the landmarks are no
// evidence at all. A clip overlaid under a bed of its own loudness keeps
// few landmarks but all of its samples: on the tuning seeds 21-26
// (clean, 0 dB and +2 % speed, 48 episodes) 0.001 instead of 0.01
// found 20 more occurrences at 0 dB (5 of clips of 3 s and longer) and
// two more elsewhere, and no false alarm; 0.0001 found no more, at twice
// the cost. (An 8 s ringtone overlaid 3 dB under the bed, its samples
// correlating 0.61 with only 9 votes, was the miss that showed it.)
const heardAt = 0.001

// waveDOF is how many independent samples a second of audio counts as
// when its correlation with unrelated audio is judged (the correlation of
// n independent samples has a spread of 1/√n), and waveLags how many
// lags refine tries, in either polarity, each a chance to correlate by
// chance. Audio is far from independent samples: 80 a second is fitted on
// the tuning corpus
// so that the best correlation any unrelated passage reached there
// (0.31 with a 1.2 s clip, among 80 candidates) is no evidence, while
// the samples of short clips the landmarks missed (0.44 to 0.99) are.
const waveDOF, waveLags = 80, 2 * 3 * 256

// waveSignificance is −log10 of the chance that unrelated audio
// correlates with a clip of seconds as well as w at the best of
// waveLags lags (a normal tail of w√n, n = waveDOF a second), 0 when
// that is no evidence. It is added to the landmarks' significance: the
// two are independent evidence of one occurrence.
func waveSignificance(w, seconds float64) float64 {
	if w <= 0 {
		return 0
	}
	z := w * math.Sqrt(waveDOF*seconds)
	// log10 of the upper normal tail, erfc for moderate z, its
	// asymptote beyond.
	var lt float64
	if z < 30 {
		lt = math.Log10(0.5 * math.Erfc(z/math.Sqrt2))
	} else {
		lt = (-z*z/2 - math.Log(z*math.Sqrt(2*math.Pi))) / math.Ln10
	}
	return max(0, -lt-math.Log10(waveLags))
}

// waveClear and waveMargin: a candidate's samples match the clip clearly
// (normalised correlation) and clearly better than the most significant
// candidate's.
const waveClear, waveMargin = 0.5, 0.2

// certain is the significance of the landmarks (−log10 of the chance
// probability; confidence 0.9997) from which an alignment is surely the
// clip's, and its votes no longer say which of two such is its place.
const certain = 2 * SignificanceAt

// placedBetter tells whether a, an alignment of a clip overlapping the
// more significant alignment b of the same clip (at another offset, or
// of another speed variant), is the clip's place instead: its samples
// match the passage clearly, and clearly better than b's, and its
// landmarks are at least half as significant as b's, or both are
// certain. On a tuning corpus (SEED=31) a looping ringtone played 2 %
// fast gathered 882 votes (significance 1732) a loop before its place,
// framed better there, and 710 (816) at it, where its samples correlate
// 0.997 against 0.64; on SEED=26 an alarm's bell 178 votes (385) a ring
// after its place against 42 (65), its samples 0.38 against 0.97.
//
// A clip played at another tempo matches in part at its variant's factor,
// where its loudest seconds are aligned: where the samples placed one of
// the two at another factor (pin), both certain, the one placed so is the
// better placed if the other's samples match in part only (in one of its
// first and last quarters, waveThroughout) or its band envelopes follow
// the passage better (Similarity) at its factor. Otherwise, or where the
// two factors are one (a speed variant placed at the clip's own speed),
// the samples compared say more. One repinned is not at its variant's
// factor, whatever its samples did there: a clip repinned by its samples
// to 0.8952, 39 ms from its place at tempo 0.90 (77.5 of significance, 12
// stretches on its line), fell to one pinned at 0.9004 0.23 s early
// (41.1, 9), as though it still matched in part at factor 1.
//
// Of two certain alignments of one variant at its factor, one whose
// samples match in part only and one placed at another factor once
// reported (repin), the one placed so is the better placed: a 5.8 s clip
// at tempo 0.95 gathered 210.7 of significance 0.2 s after its start,
// where its samples correlate 0.26 in part, and 150.2 at a place its
// samples put at 0.948, to 9 ms. (Across variants a repinned candidate is
// ranked as it was decided: the clip's own candidate, repinned to 1.0125,
// took the place of its 1.02 variant's, 2 % fast, right one.) Its samples
// must have placed it, though, where the other's band envelopes follow
// the passage better than its own do where they placed it
// (envelopesRepinnedWorse); where they follow better, one they placed
// stands even short of certain (envelopesRepinnedBetter); and one its
// samples placed is the better placed over one matching throughout too,
// where its samples matched clearly and better than the other's before
// they moved it (repinnedNearer).
//
// Of two certain alignments both placed at another factor, one by its
// samples (pin) and one by its band envelopes alone, the one its samples
// placed is the better placed if its envelopes follow the passage at
// least as well: a 30 s clip of music played 10 % fast gathered 66.3 of
// significance a bar after its start, where the music repeats itself and
// its envelopes follow 0.60, and 45.0 at its start, placed by its samples
// to 1 ms, its envelopes following 0.93. Where one of the two was
// repinned, more of pin's stretches on its line place it
// (stretchesPlaceBetter).
//
// A clip resampled to the speed found (respeed) whose samples match
// clearly, and clearly better than the other's, is the better placed
// whatever the landmarks: in seed 12's corpus a 2.9 s clip played at
// 0.95 gathered 47.9 of significance at its 0.96 variant (samples 0.30)
// and 16.3 at its 0.94 variant resampled to 0.95 (samples 0.96).
func placedBetter(a, b scored) bool {
	if a.respeeded != b.respeeded {
		if a.respeeded {
			return a.wave >= waveClear && a.wave >= b.wave+waveMargin
		}
		if b.wave >= waveClear && b.wave >= a.wave+waveMargin {
			return false
		}
	}
	if a.pinned != b.pinned && !a.repinned && !b.repinned && math.Abs(a.Speed*a.Tempo-b.Speed*b.Tempo) >= minFactor {
		asIs, pl := b, a // the one at its variant's factor, the one placed at another
		if b.pinned {
			asIs, pl = a, b
		}
		plWins := min(a.sig, b.sig) >= certain && (asIs.partial || pl.corr > asIs.corr)
		if a.pinned {
			return plWins
		}
		return !plWins && samplesPlaceBetter(a, b) // its samples say more
	}
	if worse, ok := either(envelopesRepinnedWorse, a, b); ok {
		return !worse
	}
	if better, ok := either(envelopesRepinnedBetter, a, b); ok {
		return better
	}
	if a.idx == b.idx && a.repinned != b.repinned && (a.repinned && b.partial || b.repinned && a.partial) && min(a.sig, b.sig) >= certain {
		return a.repinned
	}
	if better, ok := either(repinnedNearer, a, b); ok {
		return better
	}
	if a.scaled && b.scaled && a.pinned != b.pinned && min(a.sig, b.sig) >= certain {
		return a.pinned && a.corr >= b.corr
	}
	if better, ok := either(stretchesPlaceBetter, a, b); ok {
		return better
	}
	if better, ok := either(pinsPlaceBetter, a, b); ok {
		return better
	}
	return samplesPlaceBetter(a, b)
}

// pinsPlaceBetter reports whether a is placed better than b, both placed
// by their samples at another factor than their variant's (pin; not
// respeed), of one variant, both certain: more of pin's stretches lie on
// a's line than on b's, and a's band envelopes follow the passage better.
// Neither's samples were compared whole (at another factor they are not),
// and the landmarks of music repeating itself gather as much a few bars
// off its place as at it: a 30 s clip at tempo 0.95 gathered 136.2 of
// significance 9.7 s after its place, placed by its samples there (5 of
// its 12 stretches on the line, its envelopes following 0.379), and 65.2
// at its place, to 2 ms (12 stretches, 0.910).
func pinsPlaceBetter(a, b scored) bool {
	return a.idx == b.idx && a.pinned && b.pinned && !a.respeeded && !b.respeeded &&
		a.onLine > b.onLine && a.corr > b.corr && min(a.sig, b.sig) >= certain
}

// either reports whether rule holds for a against b (holds), where it
// holds one way or the other (decided): the rules of placedBetter that
// weigh two kinds of alignment, whichever comes first.
func either(rule func(a, b scored) bool, a, b scored) (holds, decided bool) {
	if rule(a, b) {
		return true, true
	}
	return false, rule(b, a)
}

// repinnedNearer reports whether a, placed by its samples at another
// factor once reported (repin), is placed better than b, an alignment of
// the same variant at its factor, both certain, because at that factor
// a's samples matched clearly and better than b's: aligned at its loudest
// 2 s, a lay nearer the clip's place than b did before its samples moved
// it. A 6.5 s clip of a tongue drum at tempo 0.95, a note a second,
// gathered 247.9 of significance 0.25 s after its place, its samples
// matching 0.58 throughout (the drum correlates at any shift of its
// beat), and 123.5 one offset earlier, its samples 0.68 in part, whose
// samples then placed it at 0.9492, to 2 ms.
func repinnedNearer(a, b scored) bool {
	return a.idx == b.idx && a.repinned && a.Refined && !b.repinned && !b.scaled &&
		a.wave >= waveClear && a.wave > b.wave && min(a.sig, b.sig) >= certain
}

// envelopesRepinnedWorse reports whether a, placed at another factor by
// its band envelopes alone once reported (repin), is placed worse than b,
// an alignment of the same variant at its factor whose samples match in
// part only, both certain, because b's envelopes follow the passage better
// at its factor than a's do at theirs. A 4.0 s clip repeating a sound
// every third of a second, at tempo 0.95, gathered 191.1 of significance
// where its envelopes moved it to 0.899, 0.84 s after its place, following
// the passage 0.583 there, and 157.8 62 ms after its place, its envelopes
// following 0.868 at factor 1 (its samples 0.34, in part).
func envelopesRepinnedWorse(a, b scored) bool {
	return envelopesAgainstPartial(a, b) && b.corr > a.repinCorr && min(a.sig, b.sig) >= certain
}

// envelopesAgainstPartial reports whether a was placed at another factor
// by its band envelopes alone once reported (repin) and b is an alignment
// of the same variant at its factor whose samples match in part only: the
// two envelopesRepinnedWorse and envelopesRepinnedBetter weigh.
func envelopesAgainstPartial(a, b scored) bool {
	return a.idx == b.idx && a.repinned && !a.Refined && !b.repinned && !b.scaled && b.partial
}

// envelopesRepinnedBetter reports whether a, placed at another factor by
// its band envelopes alone once reported (repin), confident but short of
// certain, is placed better than b, a certain alignment of the same
// variant at its factor whose samples match in part only, because a's
// envelopes follow the passage better where they placed it than b's do at
// its factor (as envelopesRepinnedWorse the other way; where a is certain,
// placedBetter's repinned-over-partial rule stands). The 4.0 s clip of
// envelopesRepinnedWorse, at tempo 1.10: 24.2 of significance where its
// envelopes moved it to 1.105, to 9 ms, following 0.634, against 36.2 at
// factor 1, 0.31 s late, following 0.519.
func envelopesRepinnedBetter(a, b scored) bool {
	return envelopesAgainstPartial(a, b) && a.repinCorr > b.corr && b.sig >= certain && a.sig >= SignificanceAt && a.sig < certain
}

// stretchesPlaceBetter reports whether a, placed at another factor by its
// samples (pin, or repin by them), is placed better than b, placed at
// another factor by its band envelopes alone, both certain, of one
// variant, because more of the stretches pin looks for are found on a's
// line than on b's (onLine). The 4.0 s clip of envelopesRepinnedWorse at
// tempo 1.10, in another corpus, gathered 43.0 of significance where its
// envelopes placed it at 1.105, 0.27 s early, 6 of its 12 stretches on
// that line, and 32.1 where its samples repinned it to 1.0973, to 1 ms, 10
// on theirs. (Where both were decided at another factor, the envelopes
// decide: see placedBetter.)
func stretchesPlaceBetter(a, b scored) bool {
	bySamples := (a.pinned || a.repinned && a.Refined) && !a.respeeded
	byEnvelopes := (b.scaled || b.repinned) && !b.Refined && !b.respeeded
	return a.idx == b.idx && bySamples && byEnvelopes && a.onLine > b.onLine && min(a.sig, b.sig) >= certain
}

// samplesPlaceBetter is placedBetter by the samples compared alone: a's
// match the passage clearly, and clearly better than b's (by waveMargin,
// or, where b's match clearly too, leaving at most half of what b's leave
// unexplained), and a's landmarks are at least half as significant as
// b's, or both certain. An alarm of 5.5 s beeping once a second, at 0 dB
// SNR, gathered 11.3 of significance a beep before its place, its samples
// correlating 0.877 there (4.5 of its 5.5 s on beeps), and 6.4 at its
// place, 0.974.
func samplesPlaceBetter(a, b scored) bool {
	if a.wave < waveClear || a.wave < b.wave+waveMargin && (b.wave < waveClear || 1-a.wave > (1-b.wave)/2) {
		return false
	}
	return 2*a.sig >= b.sig || min(a.sig, b.sig) >= certain
}

// waveCorr is the normalised correlation of the clip's samples with the
// episode's from sample start, in either polarity (its magnitude: a clip
// played inverted sounds the same), and the energy of the passage's
// projection on the clip (its dot product squared over the clip's
// energy): how much of the passage the clip explains, whatever its gain.
// compared is false, and both 0, where the samples are no longer (or not
// yet) at hand, or either is silent.
func (m *Matcher) waveCorr(ic *indexedClip, start int64) (corr, projection float64, compared bool) {
	n := int64(ic.n)
	seg, at := m.samplesIn(start, start+n)
	if at != start || int64(len(seg)) != n || n == 0 {
		return 0, 0, false
	}
	c, e1, e2 := dots(ic.samples(), seg)
	if e1 <= 0 || e2 <= 0 {
		return 0, 0, false
	}
	return math.Abs(c) / math.Sqrt(e1*e2), c * c / e1, true
}

// dots is x·y, x·x and y·y.
func dots(x, y []float32) (xy, xx, yy float64) {
	return float64(audio.Dot(x, y)), float64(audio.Dot(x, x)), float64(audio.Dot(y, y))
}

// similarity is the correlation of the clip's band envelopes with the
// episode's from frame o, each band's mean over the clip taken out (so gain
// and equalisation do not count): how much the whole clip looks like the
// passage, where the votes count only landmarks.
func (m *Matcher) similarity(ic *indexedClip, o int32) float64 {
	if o < 0 || m.frames-o > int32(m.envKeep) {
		return 0 // no longer at hand
	}
	n := min(int32(len(ic.env)/Bands), m.frames-o)
	if n < 2 {
		return 0
	}
	m.envAt = m.envAt[:0]
	for i := range n {
		m.envAt = append(m.envAt, o+i)
	}
	v, _ := m.envCorr(ic, m.envAt, 0, 1)
	return v
}

// envCorr is the correlation of the clip's band envelopes, of its frames
// from i0 every stride-th, with the episode's at frames at (as many), each
// band's mean taken out; false (and 0) where either is flat.
func (m *Matcher) envCorr(ic *indexedClip, at []int32, i0, stride int32) (float64, bool) {
	k := float64(len(at))
	var sxy, sxx, syy float64
	for b := range Bands {
		var mx, my float64
		for j, e := range at {
			mx += float64(ic.env[int(i0+int32(j)*stride)*Bands+b])
			my += float64(m.env[int(e)%m.envKeep*Bands+b])
		}
		mx /= k
		my /= k
		for j, e := range at {
			x := float64(ic.env[int(i0+int32(j)*stride)*Bands+b]) - mx
			y := float64(m.env[int(e)%m.envKeep*Bands+b]) - my
			sxy += x * y
			sxx += x * x
			syy += y * y
		}
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return sxy / math.Sqrt(sxx*syy), true
}

// minScaleFrames is the shortest clip (in frames: 2 s) whose factor is
// searched: over a shorter one a factor 1 % off drifts less than a frame.
const minScaleFrames = 62

// scaleGain is how much better the band envelopes must follow the passage
// at a factor found by scaleSearch than at the variant's own (at its best
// start near the candidate) for the factor to stand: a clip buried under
// a bed finds a factor a little better by chance.
//
// waveSure is the samples' correlation at the variant's factor from which
// the factor is not searched: the clip plays at it. (A stretch keeps the
// waveform within each of its frames, so a clip played at another tempo
// correlates in part: 0.64 for a 6.5 s clip 5 % slow on the tuning
// corpus, where clips at their own speed correlate 0.96 and more.)
const scaleGain, waveSure = 0.1, 0.9

// scaleRange is how far from a variant's factor scaleSearch looks: for
// a speed variant, to where the next variant's landmarks take over (0.6 of
// the way to the nearest of Params.Speeds and 1), since its landmarks'
// bins move with the speed; for the clip as it is, 10 %, since its
// landmarks keep their bins at any tempo (only their times scale), so a
// clip played at another tempo with its pitch kept is found by them.
func scaleRange(p Params, speed float64) float64 {
	if speed == 1 {
		return 0.1
	}
	gap := math.Inf(1)
	for _, f := range append([]float64{1}, p.Speeds...) {
		if f != speed {
			gap = min(gap, math.Abs(f-speed))
		}
	}
	return min(0.6*gap, 0.1)
}

// waveThroughout tells whether the clip's samples from start correlate
// with the passage's in its first and in its last quarter alike (each at
// least half of whole, its whole clip's correlation): a clip at its
// variant's factor does; one at another tempo, whose loudest 2 s refine
// aligned, matches there alone, drifting off further away.
func (m *Matcher) waveThroughout(ic *indexedClip, start int64, whole float64) bool {
	if whole < unlike {
		return false
	}
	n := int64(ic.n)
	q := n / 4
	for _, from := range []int64{0, n - q} {
		seg, at := m.samplesIn(start+from, start+from+q)
		if at != start+from || int64(len(seg)) != q {
			return false
		}
		c, e1, e2 := dots(ic.samples()[from:from+q], seg)
		if e1 <= 0 || e2 <= 0 || math.Abs(c)/math.Sqrt(e1*e2) < whole/2 {
			return false
		}
	}
	return true
}

// reachOf is how many frames after a candidate's offset its decision
// waits for: the clip's, or its length at the slowest factor searched.
func reachOf(frames int32, scale float64) int32 {
	if frames < minScaleFrames {
		return frames
	}
	return int32(math.Ceil(float64(frames)/(1-scale))) + 1
}

// pinnable tells whether pin can place a clip of n samples: each of its
// pinWindows parts holds two of its stretches (1.5 s at 8 kHz). A clip
// shorter than minScaleFrames is not searched for its factor by its band
// envelopes, but once reported at its variant's factor its samples may
// still place it at another (repin): a 1.9 s clip at tempo 1.10, aligned
// at factor 1, starts 0.09 s off its place, a tenth of its length at most.
func pinnable(p Params, n int) bool {
	return holdsStretches(n, int(pinLen*float64(p.Rate)))
}

// atOwnFactor is the best similarity of the clip's band envelopes with
// the passage's at its variant's own factor within 3 frames of frame o
// (−1 where none is at hand).
func (m *Matcher) atOwnFactor(ic *indexedClip, o int32) float64 {
	n, best := int32(len(ic.env)/Bands), -1.0
	for st := o - 3; st <= o+3; st++ {
		best = max(best, m.similarityOf(ic, st, 1, 1, 0, n))
	}
	return best
}

// scaleSearch finds the factor r (the clip lasts 1/r of the variant's
// time) and the start frame at which the clip's band envelopes follow the
// episode's best, near a candidate at frame o whose landmarks lined up
// somewhere in the clip: first every 0.5 % and every other frame, then
// every 0.1 % and frame around the best. It returns o, 1 and −1 where
// the passage is not at hand; and at1, the best similarity at the
// variant's own factor within 3 frames of o.
func (m *Matcher) scaleSearch(ic *indexedClip, o int32) (start int32, r, sim, at1 float64) {
	w := ic.scale
	n := int32(len(ic.env) / Bands)
	try := func(st int32, r float64, stride int32) float64 {
		return m.similarityOf(ic, st, r, stride, 0, n)
	}
	at1 = m.atOwnFactor(ic, o)
	bestS, bestR, best := o, 1.0, try(o, 1, 2)
	// Where the landmarks of frame t of the clip line up at o, the clip
	// starts at o + t − t/r: between o and o + n(1 − 1/r).
	for k := -int(math.Round(w / 0.005)); k <= int(math.Round(w/0.005)); k++ {
		rr := 1 + 0.005*float64(k)
		if k == 0 {
			continue
		}
		d := int32(math.Ceil(float64(n) * math.Abs(1-1/rr)))
		lo, hi := o-2, o+2
		if rr < 1 {
			lo -= d
		} else {
			hi += d
		}
		for st := lo; st <= hi; st++ {
			if v := try(st, rr, 2); v > best {
				bestS, bestR, best = st, rr, v
			}
		}
	}
	if best < 0 {
		return o, 1, -1, at1
	}
	fineS, fineR, fine := bestS, bestR, try(bestS, bestR, 1)
	for k := -5; k <= 5; k++ {
		rr := bestR + 0.001*float64(k)
		for st := bestS - 3; st <= bestS+3; st++ {
			if v := try(st, rr, 1); v > fine {
				fineS, fineR, fine = st, rr, v
			}
		}
	}
	// Along a ridge of starts and factors the whole clip's envelopes
	// follow the passage about as well (a later start and a slower factor
	// meet in the middle): its first and last quarters, each placed
	// alone, pin the start and the end.
	q := max(n/4, 16)
	if n >= 2*q {
		head, hv := fineS, m.similarityOf(ic, fineS, fineR, 1, 0, q)
		for st := fineS - 8; st <= fineS+8; st++ {
			if v := m.similarityOf(ic, st, fineR, 1, 0, q); v > hv {
				head, hv = st, v
			}
		}
		at := fineS + int32(math.Round(float64(n-q)/fineR))
		tail, tv := at, m.similarityOf(ic, at, fineR, 1, n-q, n)
		for st := at - 8; st <= at+8; st++ {
			if v := m.similarityOf(ic, st, fineR, 1, n-q, n); v > tv {
				tail, tv = st, v
			}
		}
		if hv > 0 && tv > 0 && tail > head {
			if rr := float64(n-q) / float64(tail-head); math.Abs(rr-bestR) <= 0.01 {
				if v := try(head, rr, 1); v >= fine-0.02 {
					fineS, fineR, fine = head, rr, v
				}
			}
		}
	}
	if math.Abs(fineR-1) < 0.0005 {
		return fineS, 1, fine, at1
	}
	return fineS, fineR, fine, at1
}

// pinWindows is how many short stretches of a clip's samples place a clip
// found at another tempo (pin), and pinLen their length in seconds: under
// a WSOLA segment (sox's tempo: 82 ms), so that a stretch keeps each one's
// waveform; pinTol is how far from the line through the others one may
// lie and still count, in seconds (a tempo's WSOLA moves a segment by up
// to 15 ms, but keeps most of them within 3 ms of the line through the
// rest, and a stretch of a sustained note may lock on a period of its
// pitch away: a looser tolerance let a tilted line through both kinds
// win); pinClear the correlation from which a stretch counts as found.
const (
	pinWindows = 12
	pinLen     = 0.064
	pinTol     = 0.008
	pinClear   = 0.6
)

// pin places a clip by its samples where its factor is not its variant's:
// the stretch of pinLen in each of pinWindows parts of the clip where its
// energy rises most (onset) is looked for where the line through those
// found so far puts it, nearest first to the anchor (clip sample t0 at episode sample e0, the clip
// lasting a0 episode samples a clip sample, give or take da), within
// pinTol and what the line's slope may yet be off by. The start and factor
// are those of the line through the most found stretches (at least half
// the parts, and three), false where the samples do not place it. The
// band envelopes' fit is flat along a ridge of starts and factors (a later
// start and a slower factor meet in the middle), and a frame is 32 ms;
// the samples pin a start to a few ms and the factor to a few thousandths.
// It reads no sample from limit on: those a candidate's decision has
// analysed when it streams (its reach), so that a replay, which has them
// all, places it alike.
func (m *Matcher) pin(ic *indexedClip, t0, e0, a0, da float64, limit int64) (pinned, bool) {
	win := int(pinLen * float64(m.p.Rate))
	starts := stretchesOf(ic.samples(), win)
	if starts == nil {
		return pinned{}, false
	}
	tol := pinTol * float64(m.p.Rate)
	var ws []float64
	for _, t := range starts {
		ws = append(ws, float64(t))
	}
	slices.SortFunc(ws, func(a, b float64) int { return cmp.Compare(math.Abs(a-t0), math.Abs(b-t0)) })
	var pts []point
	s, a, lo, hi := e0-a0*t0, a0, t0, t0 // the line e = s + a·t, and the clip's span it is fitted on
	for _, t := range ws {
		// The slope is known to about 2·pinTol over the span fitted.
		slope := da
		if hi-lo > 0 {
			slope = min(da, 2*tol/(hi-lo))
		}
		reach := tol + slope*max(lo-t, t-hi, 0)
		if len(pts) < 2 {
			reach = tol + da*math.Abs(t-t0) + 0.1*float64(m.p.Rate)
		}
		want := int64(math.Round(s + a*t))
		seg, from := m.samplesIn(want-int64(reach), min(want+int64(reach)+int64(win), limit))
		if len(seg) < win+1 {
			continue
		}
		x := ic.samples()[int(t) : int(t)+win]
		d, v := bestLag(x, seg, 0, int64(len(seg)-win))
		if v < pinClear {
			continue
		}
		pts = append(pts, point{t, float64(from + d)})
		lo, hi = min(lo, t), max(hi, t)
		if len(pts) >= 2 {
			if fs, fa, ok := fitLine(pts); ok {
				s, a = fs, fa
			}
		}
	}
	// The line through two found stretches that most others lie on, then
	// the least squares line through those.
	var in []point
	for i := range pts {
		for j := i + 1; j < len(pts); j++ {
			sl := (pts[j].e - pts[i].e) / (pts[j].t - pts[i].t)
			var on []point
			for _, p := range pts {
				if math.Abs(pts[i].e+(p.t-pts[i].t)*sl-p.e) <= tol {
					on = append(on, p)
				}
			}
			if len(on) > len(in) {
				in = on
			}
		}
	}
	if len(in) < max(3, pinWindows/2) {
		return pinned{}, false
	}
	s, a, ok := fitLine(in)
	// Those within half the tolerance of that line place it closer still.
	var close []point
	for _, p := range in {
		if math.Abs(s+a*p.t-p.e) <= tol/2 {
			close = append(close, p)
		}
	}
	if ok && len(close) >= 3 && len(close) < len(in) {
		s, a, ok = fitLine(close)
		in = close
	}
	if !ok || math.Abs(a-a0) > da {
		return pinned{}, false
	}
	return pinned{start: int64(math.Round(s)), r: 1 / a, bySamples: true}, true
}

// pinAt places by its samples (pin) a clip whose band envelopes start it
// at frame f at factor sr (scaleSearch): from the middle of the clip,
// where the envelopes' fit pivots, the samples' factor within 1 % of sr.
func (m *Matcher) pinAt(ic *indexedClip, f int32, sr float64, limit int64) (pinned, bool) {
	half := float64(ic.n) / 2
	return m.pin(ic, half, float64(f)*float64(m.p.Hop)+half/sr, 1/sr, 0.01, limit)
}

// periodOff places again a clip its samples placed at another factor
// (pin) where they lined it up a period of its music off: a clip of music
// repeating a bar lines up a bar off its place as well as at it, all but
// the bar that lies outside it, and pin, anchored where the clip's band
// envelopes put it, follows the line it finds first (a 30 s clip at tempo
// 0.90 placed 2.57 s early, a bar of its music, 8 of its 12 stretches on
// the line). Within periodReach of where pin placed it, the start at
// which its envelopes, at the factor found, follow the passage best (a
// local maximum more than 8 frames off) is pinned again; the clip is
// placed there where its envelopes follow better and more of pin's
// stretches lie on the line. It returns the place and its envelopes'
// similarity there; false where none is better (or all the stretches lie
// on pin's line already). It reads no sample from limit on, as pin does.
func (m *Matcher) periodOff(ic *indexedClip, pl pinned, limit int64) (pinned, float64, bool) {
	on := m.onLine(ic, float64(pl.start), 1/pl.r, limit)
	if on >= pinWindows {
		return pinned{}, 0, false
	}
	n := int32(len(ic.env) / Bands)
	st0 := int32(pl.start / int64(m.p.Hop))
	cur := m.similarityOf(ic, st0, pl.r, 2, 0, n)
	w := int32(periodReach * float64(m.p.Rate) / float64(m.p.Hop))
	best, bestV := int32(0), cur
	prev, prev2 := -2.0, -2.0
	for st := st0 - w; st <= st0+w+1; st++ {
		v := m.similarityOf(ic, st, pl.r, 2, 0, n)
		// prev, at p, is a local maximum
		if p := st - 1; prev > prev2 && prev >= v && (p < st0-8 || p > st0+8) && prev > bestV {
			best, bestV = p, prev
		}
		prev2, prev = prev, v
	}
	if bestV <= cur {
		return pinned{}, 0, false
	}
	sh, ok := m.pinAt(ic, best, pl.r, limit)
	if !ok || m.onLine(ic, float64(sh.start), 1/sh.r, limit) <= on {
		return pinned{}, 0, false
	}
	return sh, m.similarityOf(ic, int32(sh.start/int64(m.p.Hop)), sh.r, 1, 0, n), true
}

// periodReach is how far either way periodOff looks for a better start,
// in seconds: a bar of music at 60 beats a minute.
const periodReach = 4.0

// repinFrom is how far from its variant's factor the samples must place a
// clip for repin to move it: under 1 %, a clip placed at its loudest 2 s
// starts within 0.1 s of its place for all but the longest clips.
const repinFrom = 0.01

// repinGain is how much better than at its variant's factor the band
// envelopes must follow the passage at the factor scaleSearch finds for
// repin to place a clip there where its samples do not: less than a
// certain candidate's scaleGain, since the candidate is reported already
// and only its place is at stake (a 6.5 s clip overlaid 6 dB under the
// episode at tempo 0.90: 0.439 at 0.905, its place to 3 ms, against 0.396
// at factor 1, 0.4 s late).
const repinGain = 0.02

// repin places a clip aligned at start at its variant's factor by its
// loudest 2 s (refine), a candidate at frame o: by its samples (pin)
// anchored there (the excerpt's middle is where refine put it, the factor
// within the variant's search range); where they do not place it and
// byEnvelopes (not where its samples match throughout: see decide), at
// the factor and start its band envelopes follow clearly better than the
// variant's (scaleSearch, as a certain candidate's), by its samples from
// there or else by the envelopes alone; sim is how well its band
// envelopes follow the passage placed so. It is false where neither
// places it, or places it within repinFrom of the variant's factor.
func (m *Matcher) repin(ic *indexedClip, o int32, start, limit int64, byEnvelopes bool) (pl pinned, sim float64, ok bool) {
	t0 := float64(ic.excerpt()) + float64(min(excerptLen(m.p), ic.n-ic.excerpt()))/2
	pl, ok = m.pin(ic, t0, float64(start)+t0, 1, scaleRange(m.p, ic.speed), limit)
	if !ok && !byEnvelopes {
		return pinned{}, 0, false
	}
	if !ok {
		f, sr, sim, at1 := m.scaleSearch(ic, o)
		if sr == 1 || sim < at1+repinGain {
			return pinned{}, 0, false
		}
		if pl, ok = m.pinAt(ic, f, sr, limit); !ok {
			pl = pinned{start: int64(f) * int64(m.p.Hop), r: sr}
		}
	}
	if math.Abs(pl.r-1) < repinFrom {
		return pinned{}, 0, false
	}
	// The band envelopes follow the passage better placed so than where
	// refine put the clip: a jingle's repeated notes can line the samples'
	// stretches up a few percent off a clip played as it is.
	n := int32(len(ic.env) / Bands)
	if sim = m.similarityOf(ic, int32(pl.start/int64(m.p.Hop)), pl.r, 1, 0, n); sim <= m.atOwnFactor(ic, int32(start/int64(m.p.Hop))) {
		return pinned{}, 0, false
	}
	// And more of the stretches pin looks for lie on its line than on the
	// line at the variant's factor through where refine put it (a 4 s
	// clip played as it is, its samples correlating 0.79, whose stretches
	// pin lined up 4 % off: 7 there against 9 at its own factor). Where
	// the envelopes alone placed it, as many as on the factor's line will
	// do: a clip overlaid on another sound may keep few stretches that
	// correlate on either.
	if on1, on := m.onLine(ic, float64(start), 1, limit), m.onLine(ic, float64(pl.start), 1/pl.r, limit); on1 > on || on1 == on && pl.bySamples {
		return pinned{}, 0, false
	}
	return pl, sim, true
}

// stretchesOf is where the stretches of win samples that pin looks for
// start in clip x: in each of its pinWindows parts, where its energy rises
// most (onset); none where a part is shorter than two stretches.
func stretchesOf(x []float32, win int) []int {
	if !holdsStretches(len(x), win) {
		return nil
	}
	part := len(x) / pinWindows
	starts := make([]int, pinWindows)
	for k := range starts {
		starts[k] = k*part + onset(x[k*part:(k+1)*part], win)
	}
	return starts
}

// holdsStretches tells whether each of the pinWindows parts of a clip of
// n samples holds two stretches of win samples (stretchesOf).
func holdsStretches(n, win int) bool {
	return n/pinWindows >= 2*win
}

// onLine is how many of the clip's pinWindows stretches (those pin looks
// for) are found, correlating pinClear or more, within pinTol of where the
// line e = s + a·t puts them.
func (m *Matcher) onLine(ic *indexedClip, s, a float64, limit int64) int {
	win := int(pinLen * float64(m.p.Rate))
	tol := int64(pinTol * float64(m.p.Rate))
	found := 0
	for _, t := range stretchesOf(ic.samples(), win) {
		want := int64(math.Round(s + a*float64(t)))
		seg, _ := m.samplesIn(want-tol, min(want+tol+int64(win), limit))
		if len(seg) < win+1 {
			continue
		}
		if _, v := bestLag(ic.samples()[t:t+win], seg, 0, int64(len(seg)-win)); v >= pinClear {
			found++
		}
	}
	return found
}

// respeedFrom is the least correlation of a variant's band envelopes at
// its own speed from which its samples are compared at another (respeed):
// a clip played 1 % off its variant's speed keeps its envelopes (0.56 for
// a clip whose 5 landmarks of 1,349 lined up; 0.32 to 0.43 for the
// jingles under a bed as loud of TestSamplesPlaceASpeedBetweenVariants).
// respeedTrials is log10 of how many speeds and places the search tries,
// taken off the significance of the samples' correlation there.
const respeedFrom, respeedTrials = 0.3, 1.5

// respeedClear is the correlation from which a stretch respeed looks for
// counts as found.
const respeedClear = 0.2

// respeed places a variant's candidate at frame o at the speed its band
// envelopes follow the passage best (scaleSearch, within the variant's
// search range): the original clip resampled to that speed (stretch) is
// aligned at its loudest 2 s (refine), and four stretches of half a
// second along it are looked for in the passage about where that puts
// them; the line through where they are found gives the speed and the
// start again, twice (the envelopes' speed is good to some 0.5 %, the
// first line's to some 0.05 %). It returns the clip resampled to the
// speed found, its start, the correlation and projection of its samples
// there; false where the envelopes find no other speed, or one nearer
// another variant's than this one's, or the samples do not place it. It
// reads no sample from limit on, as pin does.
func (m *Matcher) respeed(ic *indexedClip, o int32, limit int64) (rs indexedClip, at int64, w, proj float64, ok bool) {
	f, sr, _, _ := m.scaleSearch(ic, o)
	if sr == 1 || math.Abs(sr-1) > SpeedStep/2+0.001 {
		// Nearer another variant's speed (or the clip's own) than
		// this one's: that one's candidate is the clip's.
		return rs, 0, 0, 0, false
	}
	orig := m.x.clips[ic.of].samples()
	at1 := func(speed float64) indexedClip {
		c := *ic
		c.speed = speed
		x := stretch(orig, speed)
		c.n, c.wave = len(x), waveWith(x, min(int(math.Round(float64(ic.excerpt())*ic.speed/speed)), len(x)-1))
		return c
	}
	speed, at := ic.speed*sr, int64(f)*int64(m.p.Hop)
	for _, slack := range []float64{0.008, 0.001} {
		rs = at1(speed)
		s, ok := m.refine(&rs, at, int64(m.p.Hop+m.p.Hop/2))
		if !ok {
			return rs, 0, 0, 0, false
		}
		at = s
		n, win := rs.n, min(rs.n/4, m.p.Rate/2)
		var pts []point
		for k := range 4 {
			t := k * (n - win) / 3
			reach := int64(slack*math.Abs(float64(t-rs.excerpt()))) + 16
			want := at + int64(t)
			seg, from := m.samplesIn(want-reach, min(want+reach+int64(win), limit))
			if len(seg) < win+1 {
				continue
			}
			d, v := bestLag(rs.samples()[t:t+win], seg, 0, int64(len(seg)-win))
			if v < respeedClear {
				continue
			}
			pts = append(pts, point{float64(t), float64(from + d)})
		}
		if len(pts) < 3 {
			return rs, 0, 0, 0, false
		}
		s0, a, ok := fitLine(pts)
		if !ok || math.Abs(a-1) > 2*slack {
			return rs, 0, 0, 0, false
		}
		speed, at = speed/a, int64(math.Round(s0))
	}
	rs = at1(speed)
	at = max(at, 0)
	if s, ok := m.refine(&rs, at, int64(m.p.Hop/4)); ok {
		at = s
	}
	if at+int64(rs.n) > limit {
		// Beyond what streaming has analysed when it decides (where its
		// samples are not at hand): a replay, which has them, decides
		// alike.
		return rs, 0, 0, 0, false
	}
	w, proj, ok = m.waveCorr(&rs, at)
	return rs, at, w, proj, ok
}

// stretch is x played at speed (resampled: it lasts 1/speed as long, every
// pitch speed times higher), by a windowed sinc of stretchTaps taps read
// from a table of stretchPhases fractional delays. x is band-limited well
// under its Nyquist (the analysis resampler keeps 0.4375 of the rate),
// and a speed of at most 1.14 keeps that under it.
func stretch(x []float32, speed float64) []float32 {
	n := int(float64(len(x)-1)/speed) + 1
	out := make([]float32, n)
	const half = stretchTaps / 2
	for i := range out {
		t := float64(i) * speed
		j := int(t)
		ph := &stretchKernel[int((t-float64(j))*stretchPhases+0.5)]
		var acc float32
		if j-half+1 >= 0 && j+half < len(x) {
			for k, v := range x[j-half+1 : j+half+1] {
				acc += v * ph[k]
			}
		} else {
			for k := range stretchTaps {
				if at := j - half + 1 + k; at >= 0 && at < len(x) {
					acc += x[at] * ph[k]
				}
			}
		}
		out[i] = acc
	}
	return out
}

// stretchTaps and stretchPhases size stretch's kernel.
const stretchTaps, stretchPhases = 16, 256

// stretchKernel holds, for each fractional delay d of stretchPhases + 1,
// the Lanczos-windowed sinc's taps at input samples j − 7 … j + 8 for a
// point j + d.
var stretchKernel = func() (k [stretchPhases + 1][stretchTaps]float32) {
	const a = stretchTaps / 2
	for p := range k {
		d := float64(p) / stretchPhases
		for i := range stretchTaps {
			x := float64(i-a+1) - d
			v := 1.0
			if x != 0 {
				px := math.Pi * x
				v = a * math.Sin(px) * math.Sin(px/a) / (px * px)
			}
			k[p][i] = float32(v)
		}
	}
	return k
}()

// pinned is where a clip is placed at another factor: its start (in
// samples), its factor, and whether its samples placed it (pin) or its
// band envelopes alone (scaleSearch).
type pinned struct {
	start     int64
	r         float64
	bySamples bool
}

// onset is the start of the n-sample stretch of x whose energy rises most
// over the n samples before it: a note's attack, which places a stretch
// where a sustained note, alike at every period of its pitch, does not.
func onset(x []float32, n int) int {
	if len(x) < 2*n {
		return 0
	}
	var before, now float64
	for _, v := range x[:n] {
		before += float64(v) * float64(v)
	}
	for _, v := range x[n : 2*n] {
		now += float64(v) * float64(v)
	}
	best, bestRise := n, now-before
	for i := 2 * n; i < len(x); i++ {
		a, b, c := float64(x[i-2*n]), float64(x[i-n]), float64(x[i])
		before += b*b - a*a
		now += c*c - b*b
		if now-before > bestRise {
			best, bestRise = i-n+1, now-before
		}
	}
	return best
}

// point is where a stretch of the clip (t, a clip sample) was found in
// the episode (e, an episode sample).
type point struct{ t, e float64 }

// fitLine is the least squares line e = s + a·t through ps, false where
// they do not span t or do not rise.
func fitLine(ps []point) (s, a float64, ok bool) {
	var mt, me float64
	for _, p := range ps {
		mt += p.t
		me += p.e
	}
	mt /= float64(len(ps))
	me /= float64(len(ps))
	var ste, stt float64
	for _, p := range ps {
		ste += (p.t - mt) * (p.e - me)
		stt += (p.t - mt) * (p.t - mt)
	}
	if stt == 0 || ste <= 0 {
		return 0, 0, false
	}
	a = ste / stt
	return me - a*mt, a, true
}

// minFactor is how far from its variant's factor a clip's factor, as its
// samples place it (pin), must be to stand: nearer, the clip plays at
// its variant's factor and its samples, compared so, say more.
const minFactor = 0.004

// pinAgree is how near the factors the envelopes and the samples find
// must be for the two to place a clip together: a 6.5 s clip played at
// tempo 0.95, its envelopes' factor 0.9557 and its samples' 0.9499, is
// placed so to 6 ms (at 0.5 %, it was left at factor 1, 0.2 s off).
const pinAgree = 0.0075

// similarityOf is similarity of the clip's frames [i0, i1), every
// stride-th, played at factor r from frame o (clip frame i at episode frame
// o + (i−i0)/r); −1 where the passage is not at hand or either is flat.
func (m *Matcher) similarityOf(ic *indexedClip, o int32, r float64, stride, i0, i1 int32) float64 {
	last := o + int32(float64(i1-1-i0)/r)
	if o < 0 || last >= m.frames || m.frames-o > int32(m.envKeep) || i1-i0 < 2 {
		return -1
	}
	m.envAt = m.envAt[:0]
	for i := i0; i < i1; i += stride {
		m.envAt = append(m.envAt, o+int32(float64(i-i0)/r+0.5))
	}
	v, ok := m.envCorr(ic, m.envAt, i0, stride)
	if !ok {
		return -1
	}
	return v
}

// explainedBy is how much stronger an overlapping occurrence of another
// clip must be to explain an occurrence away.
const explainedBy = 3

// flush reports the pending occurrences that no undecided candidate can
// overlap any more, unless a much stronger occurrence of another clip
// covers most of them: the same passage cannot be two clips, and the
// weaker match is a similar sound (a shared instrument, a clip that
// contains another), not the clip.
func (m *Matcher) flush(frontier int32) {
	// A clip's candidates are decided within 4 of the longest clip's
	// lengths of their start (a cluster spans at most 2 nms, then waits
	// one more), so an occurrence is final once that has passed its end.
	final := func(s scored) bool { return frontier == math.MaxInt32 || s.end+4*m.x.frames+16 < frontier }
	keep := m.pending[:0]
	var ready []scored
	for _, s := range m.pending {
		if final(s) {
			ready = append(ready, s)
		} else {
			keep = append(keep, s)
		}
	}
	m.pending = keep
	for _, a := range ready {
		if m.explained(a, ready) || m.explained(a, m.pending) || m.explained(a, m.recent) {
			continue
		}
		m.out = append(m.out, a.Occurrence)
		m.recent = append(m.recent, a)
	}
	// Forget what can no longer overlap anything undecided.
	n := 0
	for _, r := range m.recent {
		if frontier == math.MaxInt32 || r.end+5*m.x.frames+16 >= frontier {
			m.recent[n] = r
			n++
		}
	}
	m.recent = m.recent[:n]
}

func (m *Matcher) explained(a scored, by []scored) bool {
	for _, b := range by {
		if b.idx == a.idx {
			continue
		}
		if b.Clip == a.Clip {
			// Two speeds of one clip at one place: the stronger is it,
			// unless the samples place the other (placedBetter).
			stronger := placedBetter(b, a) || (!placedBetter(a, b) && (b.sig > a.sig || (b.sig == a.sig && b.idx < a.idx)))
			if stronger && min(a.end, b.end) > max(a.start, b.start) {
				return true
			}
			continue
		}
		var stronger bool
		if a.wave > 0 && b.wave > 0 && max(a.wave, b.wave) >= waveClear {
			// The samples say which clip the passage is: the one that
			// explains more of it. Near-identical sounds (two login
			// sounds of one theme) share most landmarks, and a clip
			// that holds another shares all of the other's landmarks;
			// where only the shorter plays, the longer's part that does
			// not match adds to its energy and nothing to its dot
			// product with the passage, so less of the passage projects
			// on it; where the longer plays, that part adds to both.
			stronger = b.projection > a.projection
		} else {
			// Much more significant, or as significant and more alike.
			stronger = b.sig >= explainedBy*a.sig || (b.corr > a.corr && explainedBy*b.sig >= a.sig)
		}
		overlap := min(a.end, b.end) - max(a.start, b.start)
		if stronger && float64(overlap) >= 0.5*float64(min(a.end-a.start, b.end-b.start)) {
			return true
		}
	}
	return false
}

// confidenceOf maps the significance of the votes at an offset against
// chance (−log10 of the Poisson tail P(X ≥ votes) for the clip's chance
// votes) to [0, 1], through a logistic that is 0.5 at SignificanceAt.
// Real audio repeats itself more than a Poisson process, so the threshold
// sits well above what a multiple-testing bound would ask; it and the
// slope are fitted on a tuning corpus (docs/PERFORMANCE.md).
func confidenceOf(sig float64) float64 {
	return 1 / (1 + math.Exp(-(sig-SignificanceAt)/SignificanceSlope))
}

// SignificanceAt is the significance (−log10 of the chance probability) at
// which confidence is 0.5, and SignificanceSlope its scale.
const SignificanceAt, SignificanceSlope = 16, 2.0

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
// r samples, where the clip's loudest 2 s correlate best with the episode:
// first at every lag on every refineStride-th sample (a refineStride-th
// of the work), then at every sample near the best of those. Every lag
// is tried: at every other lag alone, a narrow peak (high notes) can fall
// between two tried lags and a side peak win, a few milliseconds off
// (8.6 ms for a music clip whose samples then correlated 0.26 instead of
// 0.98).
func (m *Matcher) refine(ic *indexedClip, start, r int64) (int64, bool) {
	n := min(excerptLen(m.p), ic.n-ic.excerpt())
	if n < m.p.Rate/4 {
		return 0, false
	}
	ex := ic.samples()[ic.excerpt() : ic.excerpt()+n]
	// The passage the excerpt may lie in, within what is at hand (at
	// the start of the episode, less before the candidate).
	seg, lo := m.samplesIn(start+int64(ic.excerpt())-r, start+int64(ic.excerpt())+r+int64(n))
	if len(seg) < n {
		return 0, false
	}
	last := int64(len(seg) - n) // the last lag
	// Coarse: lag d = refineStride·q + p correlates the excerpt's every
	// refineStride-th sample with those of phase p of the passage.
	const s = refineStride
	m.ex2 = m.ex2[:0]
	for i := 0; i < n/s*s; i += s {
		m.ex2 = append(m.ex2, ex[i])
	}
	coarse, bestV := int64(0), -2.0
	for p := range min(int64(s), last+1) {
		m.seg2 = m.seg2[:0]
		for i := p; i < int64(len(seg)); i += s {
			m.seg2 = append(m.seg2, seg[i])
		}
		if q, v := bestLag(m.ex2, m.seg2, 0, (last-p)/s); v > bestV {
			coarse, bestV = s*q+p, v
		}
	}
	// Fine: every sample, at the lags next to it.
	best, v := bestLag(ex, seg, max(coarse-s, 0), min(coarse+s, last))
	if v < 0.05 {
		return 0, false
	}
	return lo + best - int64(ic.excerpt()), true
}

// aligned is an empty slice of capacity n whose first element is at an
// address that is a multiple of 16. The episode's samples are kept so
// that sample i is at an address of 4i mod 16, streaming or replaying: a
// dot product's SIMD loop (audio.Dot) aligns itself on the episode's
// samples, so its rounding, and the last digits of a correlation, would
// otherwise depend on where the samples happen to sit.
func aligned(n int) []float32 {
	b := make([]float32, n+4)
	off := int(uintptr(unsafe.Pointer(&b[0]))%16) / 4
	if off != 0 {
		off = 4 - off
	}
	return b[off : off : off+n]
}

// samplesIn is the part of the episode's samples [lo, hi) at hand, and
// where it starts: streaming, what the ring still holds (it holds more
// than any decision reaches back for: ringKeep is five of the longest
// clip's lengths, a decision comes within four); replaying, what the
// episode has.
func (m *Matcher) samplesIn(lo, hi int64) ([]float32, int64) {
	if m.replay != nil {
		return m.replay.in(lo, hi)
	}
	lo, hi = max(lo, m.ringStart), min(hi, m.ringStart+int64(len(m.ring)))
	if hi <= lo {
		return nil, lo
	}
	return m.ring[lo-m.ringStart : hi-m.ringStart], lo
}

// shortClip is the length in seconds below which a confident candidate's
// place is searched again placeHops hops either way (refine searches 1.5).
const shortClip, placeHops = 3, 8

// refineStride is how sparsely refine's coarse search samples the clip.
const refineStride = 4

// bestLag is the lag d in [from, to] at which x correlates best (the
// magnitude of the normalised correlation: either polarity) with
// y[d:d+len(x)], and that magnitude (−1 when y is silent there).
func bestLag(x, y []float32, from, to int64) (int64, float64) {
	n := int64(len(x))
	to = min(to, int64(len(y))-n)
	xE := float64(audio.Dot(x, x))
	var yE float64
	for _, v := range y[from : from+n] {
		yE += float64(v) * float64(v)
	}
	best, bestV := from, -1.0
	for d := from; d <= to; d++ {
		if d > from {
			a, b := float64(y[d-1]), float64(y[d+n-1])
			yE += b*b - a*a
		}
		if yE <= 0 || xE <= 0 {
			continue
		}
		if v := math.Abs(float64(audio.Dot(x, y[d:d+n]))) / math.Sqrt(yE*xE); v > bestV {
			best, bestV = d, v
		}
	}
	return best, bestV
}
