package locate_test

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// locateIn indexes the clips with p and returns what a matcher reports
// in the episode at or above minConf.
func locateIn(t *testing.T, p locate.Params, clips []locate.Clip, episode []float32, minConf float64) []locate.Occurrence {
	t.Helper()
	x, err := locate.NewIndex(p, clips)
	if err != nil {
		t.Fatal(err)
	}
	m := locate.NewMatcher(x)
	m.MinConfidence = minConf
	m.Write(episode)
	return m.Finish()
}

// faster plays x speed times faster by linear interpolation (another
// method than the index's resampler, as a broadcast chain would).
func faster(x []float32, speed float64) []float32 {
	out := make([]float32, int(float64(len(x))/speed))
	for i := range out {
		p := float64(i) * speed
		j := int(p)
		if j+1 >= len(x) {
			out[i] = x[len(x)-1]
			continue
		}
		f := float32(p - float64(j))
		out[i] = x[j]*(1-f) + x[j+1]*f
	}
	return out
}

// TestClipsPlayedFastOrSlow: a 6 s jingle played 2 % fast and another 2 %
// slow in an episode are found at their offsets by the index with speed
// variants (each once, under its own name), and not by the index without
// them; the one played at its own speed is found by both.
func TestClipsPlayedFastOrSlow(t *testing.T) {
	const rate = 8000
	clips := []locate.Clip{{Name: "fast", Samples: locatetest.Jingle(1, 6, rate)}, {Name: "slow", Samples: locatetest.Jingle(2, 6, rate)},
		{Name: "same", Samples: locatetest.Jingle(3, 6, rate)}}
	ep := locatetest.Bed(9, 60, rate)
	at := map[string]float64{"fast": 7, "slow": 25, "same": 44}
	locatetest.Insert(ep, faster(clips[0].Samples, 1.02), int(at["fast"]*rate), 0.8)
	locatetest.Insert(ep, faster(clips[1].Samples, 0.98), int(at["slow"]*rate), 0.8)
	locatetest.Insert(ep, clips[2].Samples, int(at["same"]*rate), 0.8)
	speed := map[string]float64{}
	run := func(speeds []float64) map[string][]float64 {
		p := locate.DefaultParams
		p.Speeds = speeds
		found := map[string][]float64{}
		for _, o := range locateIn(t, p, clips, ep, locate.Threshold) {
			if clips[o.Clip].Name != o.Name {
				t.Errorf("occurrence of clip %d named %s", o.Clip, o.Name)
			}
			found[o.Name] = append(found[o.Name], o.Offset)
			speed[o.Name] = o.Speed
		}
		return found
	}
	with := run([]float64{0.98, 1.02})
	for name, want := range at {
		if got := with[name]; len(got) != 1 || math.Abs(got[0]-want) > 0.1 {
			t.Errorf("with speed variants, %s: %v, want once at %.1f s", name, got, want)
		}
	}
	// Each is reported at the speed it was played at.
	for name, want := range map[string]float64{"fast": 1.02, "slow": 0.98, "same": 1} {
		if speed[name] != want {
			t.Errorf("%s found at speed %v, want %v", name, speed[name], want)
		}
	}
	without := run(nil)
	if len(without["fast"]) != 0 || len(without["slow"]) != 0 || len(without["same"]) != 1 {
		t.Errorf("without speed variants: %v; the test's speeds no longer defeat plain landmarks, so it shows nothing", without)
	}
}
