package locate

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestSamplesPlaceAClipAlignedAtItsLoudest: a clip played at another
// tempo, aligned at its variant's factor by its loudest 2 s (refine, as a
// candidate short of certain landmarks is: its factor is not searched), is
// placed by its samples from there (repin) at its start (within 50 ms)
// and its tempo (within 1 %), where the alignment alone starts it 0.08 to
// 0.28 s off, and one played faster at the episode's very end (at its
// variant's factor it would reach past the end, so its samples were not
// compared); a clip played as it is is left where refine put it. Asked
// to place it by its samples alone, repin places it where it did, if
// anywhere, and nowhere where its band envelopes alone did.
func TestSamplesPlaceAClipAlignedAtItsLoudest(t *testing.T) {
	const rate, pos = 8000, 6.0
	for _, c := range []struct {
		name    string
		seconds float64
		tempo   float64
		atEnd   bool // the episode ends 0.2 s after the clip
	}{
		{"tempo 0.92", 5, 0.92, false},
		{"tempo 0.95", 3, 0.95, false},
		{"tempo 1.06", 4, 1.06, false},
		{"tempo 1.10", 6, 1.10, false},
		{"tempo 1.08 at the end", 8, 1.08, true},
		{"as it is", 4, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clip := locatetest.Jingle(41, c.seconds, rate)
			x, err := NewIndex(DefaultParams, []Clip{{Name: c.name, Samples: clip}})
			if err != nil {
				t.Fatal(err)
			}
			played := clip
			if c.tempo != 1 {
				played = locatetest.AtTempo(clip, c.tempo)
			}
			after := 3.0
			if c.atEnd {
				after = 0.2
			}
			ep := locatetest.Bed(43, pos+float64(len(played))/rate+after, rate)
			locatetest.Insert(ep, played, int(pos*rate), 0.8)
			m := NewMatcher(x)
			m.Write(ep)
			ic := &x.clips[0]
			// Where the clip's loudest 2 s play, aligned at factor 1.
			ex := float64(ic.excerpt())
			guess := int64(pos*rate + ex/c.tempo - ex)
			start, ok := m.refine(ic, guess, int64(m.p.Hop))
			if !ok {
				t.Fatal("refine: the excerpt not found")
			}
			if _, _, compared := m.waveCorr(ic, start); compared == c.atEnd {
				t.Fatalf("samples compared at factor 1: %v, want %v", compared, !c.atEnd)
			}
			pl, _, ok := m.repin(ic, int32(start/int64(m.p.Hop)), start, math.MaxInt64, true)
			if c.tempo == 1 {
				if ok {
					t.Errorf("placed at %.3f s, factor %.4f: want it left at its own factor", float64(pl.start)/rate, pl.r)
				}
				return
			}
			if math.Abs(float64(start)/rate-pos) < 0.05 {
				t.Fatalf("aligned at %.3f s: the case wants an alignment off its start", float64(start)/rate)
			}
			if !ok {
				t.Fatalf("not placed (aligned at %.3f s)", float64(start)/rate)
			}
			t.Logf("aligned at %.3f s, placed at %.3f s (%.3f), factor %.4f, by samples %v", float64(start)/rate, float64(pl.start)/rate, pos, pl.r, pl.bySamples)
			if d := float64(pl.start)/rate - pos; math.Abs(d) > 0.05 {
				t.Errorf("placed at %.3f s, want %.3f", float64(pl.start)/rate, pos)
			}
			if math.Abs(pl.r/c.tempo-1) > 0.01 {
				t.Errorf("factor %.4f, want %.2f", pl.r, c.tempo)
			}
			// Where its samples match throughout at factor 1, only they
			// place it, from its loudest 2 s: where they do, as before;
			// never where the envelopes alone did.
			if again, _, ok := m.repin(ic, int32(start/int64(m.p.Hop)), start, math.MaxInt64, false); ok && (again != pl || !pl.bySamples) {
				t.Errorf("by its samples alone: placed at %.3f s, factor %.4f; by both at %.3f s, factor %.4f, by samples %v", float64(again.start)/rate, again.r, float64(pl.start)/rate, pl.r, pl.bySamples)
			} else {
				t.Logf("by its samples alone: placed %v", ok)
			}
		})
	}
}
