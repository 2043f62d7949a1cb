package locate_test

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// wavStream is samples at rate as a decoded WAV file.
func wavStream(t testing.TB, x []float32, rate int) audio.Stream {
	s, err := audio.Open(bytes.NewReader(locatetest.WAV(x, rate)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClipAboveTheBandFound: a 5 s ringing whose energy lies between 6 and
// 8 kHz, above the 3.5 kHz the landmarks are taken from, played 12 dB
// under a bed at 32 kHz, and again 2 % fast, is found both times through
// the episode's high band within 10 ms of its place; without its variants
// in the high band only where it plays at its own speed; without its high
// band (as the locator read clips before) not at all.
func TestClipAboveTheBandFound(t *testing.T) {
	const rate = 32000
	ring := locatetest.Ring(41, 5, rate)
	ep := locatetest.Bed(42, 40, rate)
	at, atFast := 9*rate+123, 27*rate+45
	locatetest.Insert(ep, ring, at, 0.125)
	locatetest.Insert(ep, faster(ring, 1.02), atFast, 0.125)
	clip, err := locate.ReadClip("ring", wavStream(t, ring, rate), locate.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	if clip.High == nil || len(clip.HighSpeeds) != len(locate.DefaultParams.Speeds) {
		t.Fatalf("a 32 kHz ringing has a high band and its variants: %d samples, %d variants", len(clip.High), len(clip.HighSpeeds))
	}
	for _, tc := range []struct {
		name string
		clip locate.Clip
		want []int
	}{
		{"with its high band", clip, []int{at, atFast}},
		{"without its variants there", locate.Clip{Name: "ring", Samples: clip.Samples, High: clip.High}, []int{at}},
		{"without", locate.Clip{Name: "ring", Samples: clip.Samples}, nil},
	} {
		x, err := locate.NewIndex(locate.DefaultParams, []locate.Clip{tc.clip})
		if err != nil {
			t.Fatal(err)
		}
		if x.HighBand() != (tc.want != nil) {
			t.Fatalf("%s: HighBand() = %v", tc.name, x.HighBand())
		}
		m := locate.NewMatcher(x)
		if err := m.Stream(context.Background(), wavStream(t, ep, rate)); err != nil {
			t.Fatal(err)
		}
		occ := m.Finish()
		ok := len(occ) == len(tc.want)
		for i := 0; ok && i < len(occ); i++ {
			ok = math.Abs(occ[i].Offset-float64(tc.want[i])/rate) <= 0.01
		}
		if !ok {
			t.Errorf("%s: found %+v, want at %v samples of %d Hz", tc.name, occ, tc.want, rate)
		}
	}
}
