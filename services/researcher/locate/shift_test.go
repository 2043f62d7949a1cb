package locate_test

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestShortClipsOffTheHop: eight 1.2 s jingles, each overlaid on the bed
// at its own level half a hop off the episode's frames (where a clip's
// landmarks and the episode's differ most), are each found once at their
// offset with the default sub-hop shifts, and gather more votes with them
// than without.
func TestShortClipsOffTheHop(t *testing.T) {
	const rate = 8000
	hop := locate.DefaultParams.Hop
	var clips []locate.Clip
	for i := range 8 {
		clips = append(clips, locate.Clip{Name: string(rune('a' + i)), Samples: locatetest.Jingle(uint64(100+i), 1.2, rate)})
	}
	ep := locatetest.Bed(7, 90, rate)
	at := map[string]int{}
	for i, c := range clips {
		at[c.Name] = (5+10*i)*rate/hop*hop + hop/2
		locatetest.Insert(ep, c.Samples, at[c.Name], 0.5)
	}
	run := func(shifts int) (map[string][]locate.Occurrence, int) {
		p := locate.DefaultParams
		p.Shifts = shifts
		found, votes := map[string][]locate.Occurrence{}, 0
		for _, o := range locateIn(t, p, clips, ep, 0.001) {
			if math.Abs(o.Offset-float64(at[o.Name])/rate) <= 0.1 {
				votes += o.Votes
				if o.Confidence >= locate.Threshold {
					found[o.Name] = append(found[o.Name], o)
				}
			} else if o.Confidence >= locate.Threshold {
				t.Errorf("shifts %d: %s reported at %.3f s, where it is not (conf %.3f)", shifts, o.Name, o.Offset, o.Confidence)
			}
		}
		return found, votes
	}
	with, votesWith := run(locate.DefaultParams.Shifts)
	for _, c := range clips {
		if len(with[c.Name]) != 1 {
			t.Errorf("with %d shifts, %s found %d times at %.3f s, want once", locate.DefaultParams.Shifts, c.Name, len(with[c.Name]), float64(at[c.Name])/rate)
		}
	}
	_, votesWithout := run(1)
	t.Logf("votes at the clips' places: %d with %d shifts, %d without", votesWith, locate.DefaultParams.Shifts, votesWithout)
	if votesWith <= votesWithout {
		t.Errorf("shifts brought no votes: %d with, %d without", votesWith, votesWithout)
	}
}
