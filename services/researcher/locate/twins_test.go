package locate_test

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestClipWithinClip: "long" is "short" followed by 4 s more. Where only
// "short" plays, "short" is reported and "long" is not, though every one
// of short's landmarks is also long's; where "long" plays, "long" is
// reported and "short", which it holds, is not.
func TestClipWithinClip(t *testing.T) {
	const rate = 8000
	short := locatetest.Jingle(21, 4, rate)
	long := append(append([]float32(nil), short...), locatetest.Jingle(22, 4, rate)...)
	clips := []locate.Clip{{Name: "short", Samples: short}, {Name: "long", Samples: long}}
	ep := locatetest.Bed(23, 60, rate)
	locatetest.Insert(ep, short, 10*rate, 0.7)
	locatetest.Insert(ep, long, 35*rate, 0.7)
	found := map[string][]float64{}
	for _, o := range locateIn(t, locate.DefaultParams, clips, ep, locate.Threshold) {
		found[o.Name] = append(found[o.Name], o.Offset)
	}
	for name, want := range map[string]float64{"short": 10, "long": 35} {
		if got := found[name]; len(got) != 1 || math.Abs(got[0]-want) > 0.1 {
			t.Errorf("%s found at %v, want once at %.0f s (all: %v)", name, got, want, found)
		}
	}
}

// TestRepeatingShortClipPlaced: a 1.2 s clip made of one 0.15 s figure
// played eight times, whose landmarks also line up a beat (seven of eight
// figures) off its place, is reported once, within 5 ms of where it plays,
// off the frame grid.
func TestRepeatingShortClipPlaced(t *testing.T) {
	const rate = 8000
	beat := locatetest.Jingle(31, 0.15, rate)
	var clip []float32
	for range 8 {
		clip = append(clip, beat...)
	}
	ep := locatetest.Bed(32, 30, rate)
	at := 12*rate + 77
	locatetest.Insert(ep, clip, at, 0.8)
	occ := locateIn(t, locate.DefaultParams, []locate.Clip{{Name: "ring", Samples: clip}}, ep, locate.Threshold)
	if len(occ) != 1 || math.Abs(occ[0].Offset-float64(at)/rate) > 0.005 {
		t.Fatalf("found %+v, want once at %.4f s", occ, float64(at)/rate)
	}
}
