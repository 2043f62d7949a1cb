package locate_test

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestInvertedPolarity: a clip played with its polarity inverted (a
// channel wired the other way round, a stereo pair summed out of phase)
// sounds the same and is found the same: at its place to the
// millisecond, its samples matching (Waveform), not only its landmarks.
func TestInvertedPolarity(t *testing.T) {
	const rate = 8000
	clip := locatetest.Jingle(41, 1.2, rate)
	ep := locatetest.Bed(42, 40, rate)
	at := 17*rate + 133
	locatetest.Insert(ep, clip, at, -0.5)
	occ := locateIn(t, locate.DefaultParams, []locate.Clip{{Name: "jingle", Samples: clip}}, ep, locate.Threshold)
	if len(occ) != 1 || math.Abs(occ[0].Offset-float64(at)/rate) > 0.001 {
		t.Fatalf("found %+v, want once at %.4f s", occ, float64(at)/rate)
	}
	if occ[0].Waveform < 0.5 {
		t.Errorf("samples correlate %.2f, want the inverted clip's samples to match", occ[0].Waveform)
	}
}
