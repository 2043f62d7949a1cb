package locate_test

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestSamplesPlaceASpeedBetweenVariants: jingles played 1 % off the
// speeds of the default variants (0.97, 1.03) under a bed about as loud
// as they are keep few landmarks, and their samples do not match at a
// variant's speed (0.10 for the first: it was reported at 0.98, 64 ms
// early, and the others not at all); resampled to the speed their band
// envelopes find, their samples place them: each is found once at its
// place (within 20 ms), its speed within 0.2 %, its samples compared
// there (0.2 and more); and replaying the episode's print finds the same.
func TestSamplesPlaceASpeedBetweenVariants(t *testing.T) {
	const rate = 8000
	cases := []struct {
		name    string
		seconds float64
		speed   float64
		gain    float32
	}{
		{"0.97", 8, 0.97, 0.8},
		{"1.03", 6, 1.03, 0.6},
		{"0.97 quieter", 10, 0.97, 0.5},
		{"1.03 again", 7, 1.03, 0.7},
	}
	ep := locatetest.Bed(91, 160, rate)
	var clips []locate.Clip
	at := map[string]float64{}
	pos := 7.0
	for i, c := range cases {
		x := locatetest.Jingle(uint64(300+i), c.seconds, rate)
		clips = append(clips, locate.Clip{Name: c.name, Samples: x})
		played := faster(x, c.speed)
		locatetest.Insert(ep, played, int(pos*rate), c.gain)
		at[c.name] = pos
		pos += float64(len(played))/rate + 20
	}
	found := locateIn(t, locate.DefaultParams, clips, ep, locate.Threshold)
	seen := map[string]int{}
	for _, o := range found {
		c := cases[o.Clip]
		seen[c.name]++
		t.Logf("%s: at %.3f s (%.3f), speed %.4f, confidence %.4f, votes %d, similarity %.2f, waveform %.2f", c.name, o.Offset, at[c.name], o.Speed, o.Confidence, o.Votes, o.Similarity, o.Waveform)
		if math.Abs(o.Offset-at[c.name]) > 0.02 {
			t.Errorf("%s found at %.3f s, want %.3f", c.name, o.Offset, at[c.name])
		}
		if math.Abs(o.Speed/c.speed-1) > 0.002 || o.Tempo != 1 {
			t.Errorf("%s found at speed %.4f and tempo %.3f, want %.2f and 1", c.name, o.Speed, o.Tempo, c.speed)
		}
		if o.Waveform < 0.2 {
			t.Errorf("%s: its samples correlate %.2f, want them compared at its speed", c.name, o.Waveform)
		}
	}
	for _, c := range cases {
		if seen[c.name] != 1 {
			t.Errorf("%s found %d times, want once", c.name, seen[c.name])
		}
	}
	// Replaying the episode's print finds the same, to the last field.
	replaysAsStreamed(t, locate.DefaultParams, clips, ep, len(cases))
}
