package locate

import (
	"reflect"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestQuietClipsAreNotSteppedFrameByFrame: a clip whose offsets left to
// close are quiet (no vote, window or cluster: wake) is not stepped as
// the frontier moves, but closed in one step when its closing reaches a
// vote or it gets another; a matcher stepping every clip with votes open
// at every frame (as before) decides each candidate at the same frame,
// ends in the same state, clip by clip, and finds and explains the same,
// to the last field. Many chance votes: clips at eleven speeds, far
// below the reporting threshold.
func TestQuietClipsAreNotSteppedFrameByFrame(t *testing.T) {
	const rate = 8000
	p, err := DefaultParams.Spanning(0.1)
	if err != nil {
		t.Fatal(err)
	}
	var clips []Clip
	ep := locatetest.Bed(71, 90, rate)
	for i, seconds := range []float64{2, 5.5, 8, 3, 1.2, 12} {
		c := Clip{Name: string(rune('a' + i)), Samples: locatetest.Jingle(uint64(70+i), seconds, rate)}
		clips = append(clips, c)
		if i%2 == 0 {
			locatetest.Insert(ep, atSpeedOf(t, c.Samples, rate, 0.96+0.02*float64(i)), (5+13*i)*rate+17*i, 0.7)
		}
	}
	x, err := NewIndex(p, clips)
	if err != nil {
		t.Fatal(err)
	}
	lazy := NewMatcher(x)
	every := NewMatcher(x)
	every.stepEvery = true
	// A frame at a time: each candidate is decided at the same frame,
	// where the samples it is compared with are the same.
	ms := []*Matcher{lazy, every}
	for _, m := range ms {
		m.MinConfidence, m.Explain = 0.01, 3
	}
	for i := 0; i < len(ep); i += p.Hop {
		for _, m := range ms {
			m.Write(ep[i:min(i+p.Hop, len(ep))])
		}
		// What a quiet clip has left to close is quiet: no vote, window
		// or cluster it has not stepped through.
		for c := range lazy.clips {
			st := &lazy.clips[c]
			if upTo := lazy.frontier - x.clips[c].reach - 1; st.closed < upTo && st.quietTo() < upTo {
				t.Fatalf("at %.2f s: clip %d closed to %d of %d, its offset %d not quiet", float64(i)/rate, c, st.closed, upTo, st.quietTo())
			}
		}
		// Now and then, every clip brought up to date (as its next vote
		// would; an idle one is, stepped or not) is as stepped frame by
		// frame.
		if i/p.Hop%97 == 96 {
			for c := range lazy.clips {
				for _, m := range ms {
					if upTo := m.frontier - x.clips[c].reach - 1; m.clips[c].closed < upTo {
						m.closeUpTo(c, upTo)
					}
				}
				sameClipState(t, x, c, &lazy.clips[c], &every.clips[c])
			}
		}
		if !reflect.DeepEqual(lazy.pending, every.pending) || len(lazy.out) != len(every.out) || !reflect.DeepEqual(lazy.refused, every.refused) {
			t.Fatalf("at %.2f s: %d decided and waiting, %d reported, %d clips with candidates refused; stepping every frame %d, %d and %d",
				float64(i)/rate, len(lazy.pending), len(lazy.out), len(lazy.refused), len(every.pending), len(every.out), len(every.refused))
		}
	}
	var found [2][]Occurrence
	var misses [2][]Miss
	for k, m := range ms {
		found[k], misses[k] = m.Finish(), m.Misses()
	}
	if len(found[0]) == 0 {
		t.Fatal("nothing found: the test compares nothing")
	}
	if !reflect.DeepEqual(found[0], found[1]) {
		t.Errorf("found %d occurrences, stepping every frame %d:\n%+v\n%+v", len(found[0]), len(found[1]), found[0], found[1])
	}
	if !reflect.DeepEqual(misses[0], misses[1]) {
		t.Errorf("misses explained differently:\n%+v\n%+v", misses[0], misses[1])
	}
	for c := range x.clips {
		sameClipState(t, x, c, &lazy.clips[c], &every.clips[c])
	}
	t.Logf("%d occurrences, %d misses explained, %d clips and variants", len(found[0]), len(misses[0]), len(x.clips))
}

// sameClipState fails t where clip c's state a, its offsets closed
// quiet ones at a time, is not b, stepped frame by frame.
func sameClipState(t *testing.T, x *Index, c int, a, b *clipState) {
	t.Helper()
	if a.closed != b.closed || a.open != b.open || a.prev != b.prev || a.total != b.total || a.nClosed != b.nClosed || a.bestW != b.bestW || a.bestO != b.bestO || !reflect.DeepEqual(a.hist, b.hist) || !reflect.DeepEqual(a.votes, b.votes) {
		t.Fatalf("clip %d (%s at %g): closed %d, %d votes open, %d at %d offsets, best %d at %d, background %v; stepping every frame %d, %d, %d at %d, %d at %d, %v",
			c, x.clips[c].name, x.clips[c].speed, a.closed, a.open, a.total, a.nClosed, a.bestW, a.bestO, a.hist, b.closed, b.open, b.total, b.nClosed, b.bestW, b.bestO, b.hist)
	}
}

// atSpeedOf is atSpeed, failing t on an error.
func atSpeedOf(t *testing.T, x []float32, rate int, speed float64) []float32 {
	t.Helper()
	y, err := atSpeed(x, rate, speed)
	if err != nil {
		t.Fatal(err)
	}
	return y
}
