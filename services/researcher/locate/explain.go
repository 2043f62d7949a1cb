package locate

import (
	"cmp"
	"math"
	"slices"

	"github.com/archivist/archivist/events"
)

// Miss explains a clip found nowhere in the episode: its best candidates,
// each with the evidence it had and the stage of the matcher that refused
// it, so that an operator can tell "not there" (few landmarks anywhere,
// nothing like the clip) from "too degraded" (the landmarks point at a
// place, and the samples there are the clip's under noise).
type Miss struct {
	// Clip is the clip's index in the Index, Name its name.
	Clip int    `json:"clip"`
	Name string `json:"name"`
	// Candidates are the best refused, most confident first (at most
	// Matcher.Explain).
	Candidates []Refused `json:"candidates"`
}

// Refused is a candidate occurrence the matcher did not report, and why.
type Refused struct {
	// Offset is where the clip would start in the episode, in seconds.
	Offset float64 `json:"offset"`
	// Votes are the clip's landmarks that lined up there, of Hashes; Needed
	// is how many the landmarks alone needed to be reported there (with
	// the chance rate of that stretch of the episode).
	Votes  int `json:"votes"`
	Needed int `json:"needed"`
	Hashes int `json:"hashes"`
	// Confidence is what the evidence gathered before the refusal came
	// to (Threshold is reported).
	Confidence float64 `json:"confidence"`
	// Similarity and Waveform are the correlations of the whole clip's
	// band envelopes and samples with the passage's (0: not compared).
	Similarity float64 `json:"similarity"`
	Waveform   float64 `json:"waveform"`
	// SNR is the clip's loudness over the rest of the passage, in dB, as
	// the waveform correlation estimates it (absent: not compared).
	SNR *float64 `json:"snr_db,omitempty"`
	// Speed is the playback speed of the clip's variant that gathered the
	// votes (1: as it is).
	Speed float64 `json:"speed"`
	// Stage is the matcher's stage that refused it: votes, landmarks,
	// envelopes, unlike, confidence or samples (Stages).
	Stage string `json:"stage"`
	// lambda is the chance rate of votes at the place, and discount the
	// refusing index's, for Needed (worked out for the candidates kept
	// alone).
	lambda, discount float64
}

// Stages say what each refusal stage means, for help and reports.
var Stages = map[string]string{
	"votes":      "too few landmarks lined up anywhere to make a candidate",
	"landmarks":  "the landmarks that lined up are what chance gives that stretch of the episode",
	"envelopes":  "too few landmarks, and the clip's band envelopes do not look like the passage's",
	"unlike":     "the landmarks lined up, but neither the band envelopes nor the samples look like the clip",
	"confidence": "landmarks and samples together fall short of the threshold",
	"samples":    "the samples do not correlate with the clip's beyond chance: a coincidence of landmarks",
}

// snrOf estimates a clip's loudness over the rest of a passage from the
// correlation of its samples with the passage's: where the passage is
// the clip scaled plus unrelated audio, r²/(1−r²) is their energy ratio.
func snrOf(r float64) *float64 {
	if !(r > 0) || math.IsInf(r, 0) {
		return nil
	}
	r = math.Min(r, 0.9999)
	db := 10 * math.Log10(r*r/(1-r*r))
	return &db
}

// votesNeeded is the least number of votes whose landmarks alone would be
// reported at r's place (where chance gives r.lambda votes an offset).
func (r Refused) votesNeeded() int {
	for k := 1; k < 1<<16; k++ {
		if confidenceOf(-poissonTailLog10(k, 3*r.lambda)-r.discount) >= Threshold {
			return k
		}
	}
	return 1 << 16
}

// refuse records a refused candidate of clip c (an index of the Index's
// clips, a variant's own) when the matcher explains its misses: the
// Explain most confident of each clip are kept.
func (m *Matcher) refuse(c int, cd candidate, lambda float64, o Occurrence, confidence float64, stage string) {
	if m.Explain <= 0 {
		return
	}
	ic := &m.x.clips[c]
	r := Refused{Offset: float64(max(cd.o, 0)) * m.p.FrameDuration(), Votes: int(cd.window), lambda: lambda, discount: m.x.discount,
		Hashes: ic.hashes, Confidence: confidence, Similarity: o.Similarity, Waveform: o.Waveform, SNR: snrOf(o.Waveform),
		Speed: ic.speed, Stage: stage}
	if m.refused == nil {
		m.refused = map[int][]Refused{}
	}
	kept := append(m.refused[ic.of], r)
	slices.SortStableFunc(kept, byEvidence)
	m.refused[ic.of] = kept[:min(len(kept), m.Explain)]
}

// byEvidence orders refused candidates most confident first, then by
// votes.
func byEvidence(a, b Refused) int {
	if c := cmp.Compare(b.Confidence, a.Confidence); c != 0 {
		return c
	}
	return cmp.Compare(b.Votes, a.Votes)
}

// Misses explains each clip of the Index found nowhere (Finish first):
// nil unless Explain is set. A clip with no candidate at all says how many
// landmarks lined up at best, and where.
func (m *Matcher) Misses() []Miss {
	if m.Explain <= 0 {
		return nil
	}
	found := map[int]bool{}
	for _, o := range m.out {
		found[o.Clip] = true
	}
	refused := m.refused
	best := m.bestVotes()
	if m.high != nil {
		refused = cloneRefused(refused)
		for c, rs := range m.high.refused {
			of := m.x.highOf[c]
			refused[of] = append(refused[of], rs...)
		}
		for c, r := range m.high.bestVotes() {
			if of := m.x.highOf[c]; r.Votes > best[of].Votes {
				best[of] = r
			}
		}
	}
	var out []Miss
	for c, ic := range m.x.clips {
		if ic.of != c || found[c] {
			continue
		}
		rs := slices.Clone(refused[c])
		slices.SortStableFunc(rs, byEvidence)
		rs = rs[:min(len(rs), m.Explain)]
		for i := range rs {
			rs[i].Needed = rs[i].votesNeeded()
		}
		if len(rs) == 0 {
			rs = []Refused{best[c]}
		}
		out = append(out, Miss{Clip: c, Name: ic.name, Candidates: rs})
	}
	return out
}

// bestVotes is, by original clip, the place where most of its landmarks
// lined up, for a clip with no candidate.
func (m *Matcher) bestVotes() map[int]Refused {
	out := map[int]Refused{}
	for c := range m.clips {
		ic, st := &m.x.clips[c], &m.clips[c]
		r := Refused{Offset: float64(max(st.bestO, 0)) * m.p.FrameDuration(), Votes: int(st.bestW), Needed: minWindowVotes,
			Hashes: ic.hashes, Speed: ic.speed, Stage: "votes"}
		if old, ok := out[ic.of]; !ok || r.Votes > old.Votes {
			out[ic.of] = r
		}
	}
	return out
}

// cloneRefused copies a map of refusals (the high band's are added to the
// copy).
func cloneRefused(in map[int][]Refused) map[int][]Refused {
	out := make(map[int][]Refused, len(in))
	for k, v := range in {
		out[k] = slices.Clone(v)
	}
	return out
}

// Event is the miss as a research result carries it.
func (m Miss) Event() *events.Miss {
	out := &events.Miss{Candidates: make([]events.MissCandidate, 0, len(m.Candidates))}
	for _, r := range m.Candidates {
		out.Candidates = append(out.Candidates, events.MissCandidate{OffsetMS: int64(math.Round(r.Offset * 1000)), Votes: r.Votes, Needed: r.Needed,
			Hashes: r.Hashes, Confidence: r.Confidence, Similarity: r.Similarity, Waveform: r.Waveform, SNRDB: r.SNR, Speed: r.Speed, Stage: r.Stage})
	}
	return out
}
