package locate_test

import (
	"math"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestSpeedAndTempoFactors: with speeds spanned to 10 % (as
// RESEARCHER_SPEED_RANGE=0.1 has it), jingles of 4 to 12 s played from 10 %
// slow to 10 % fast by speed (resampled: pitch and tempo together; on a
// variant's speed and between two), and from 8 % slow to 10 % fast by
// tempo alone (pitch kept, as sox's tempo effect does it), are found once each at their place in the
// episode's time (within 0.1 s), each with its factor within 1.5 % and its
// duration as it played, and nothing else is reported; a jingle played as
// it is is still found at speed and tempo 1 with its samples compared; and
// replaying the episode's print finds the same, to the last field.
func TestSpeedAndTempoFactors(t *testing.T) {
	const rate = 8000
	cases := []struct {
		name         string
		seconds      float64
		speed, tempo float64
	}{
		{"as it is", 6, 1, 1},
		{"tempo 0.92", 12, 1, 0.92},
		{"tempo 0.95", 8, 1, 0.95},
		{"tempo 1.04", 5, 1, 1.04},
		{"tempo 1.06", 10, 1, 1.06},
		{"tempo 1.10", 8, 1, 1.10},
		{"speed 0.90", 8, 0.90, 1},
		{"speed 0.95", 6, 0.95, 1},
		{"speed 0.97", 10, 0.97, 1},
		{"speed 1.07", 12, 1.07, 1},
		{"speed 1.10", 4, 1.10, 1},
	}
	ep := locatetest.Bed(77, 240, rate)
	var clips []locate.Clip
	at := map[string]float64{}
	pos := 5.0
	for i, c := range cases {
		x := locatetest.Jingle(uint64(100+i), c.seconds, rate)
		clips = append(clips, locate.Clip{Name: c.name, Samples: x})
		played := x
		if c.speed != 1 {
			played = faster(x, c.speed)
		}
		if c.tempo != 1 {
			played = locatetest.AtTempo(x, c.tempo)
		}
		locatetest.Insert(ep, played, int(pos*rate), 0.8)
		at[c.name] = pos
		pos += float64(len(played))/rate + 10
	}
	p, err := locate.DefaultParams.Spanning(0.1)
	if err != nil {
		t.Fatal(err)
	}
	found := locateIn(t, p, clips, ep, locate.Threshold)
	seen := map[string]int{}
	for _, o := range found {
		c := cases[o.Clip]
		seen[c.name]++
		if math.Abs(o.Offset-at[c.name]) > 0.1 {
			t.Errorf("%s found at %.3f s, want %.3f", c.name, o.Offset, at[c.name])
		}
		factor, want := o.Speed*o.Tempo, c.speed*c.tempo
		if math.Abs(factor/want-1) > 0.015 || (c.tempo != 1) != (o.Tempo != 1) && math.Abs(o.Tempo-1) > 0.015 {
			t.Errorf("%s found at speed %.3f and tempo %.3f, want %.2f and %.2f", c.name, o.Speed, o.Tempo, c.speed, c.tempo)
		}
		if d := c.seconds / want; math.Abs(o.Duration/d-1) > 0.015 {
			t.Errorf("%s lasts %.3f s, want %.3f", c.name, o.Duration, d)
		}
		if c.name == "as it is" && (o.Speed != 1 || o.Tempo != 1 || o.Waveform < 0.5) {
			t.Errorf("%s: speed %v, tempo %v, samples' correlation %.3f; want 1, 1 and its samples compared", c.name, o.Speed, o.Tempo, o.Waveform)
		}
		t.Logf("%s: at %.3f s (%.3f), speed %.3f, tempo %.3f, confidence %.3f, similarity %.2f, waveform %.2f", c.name, o.Offset, at[c.name], o.Speed, o.Tempo, o.Confidence, o.Similarity, o.Waveform)
	}
	for _, c := range cases {
		if seen[c.name] != 1 {
			t.Errorf("%s found %d times, want once", c.name, seen[c.name])
		}
	}
	// Replaying the episode's print places them as streaming it does, to
	// the last field (their factors searched and their samples placing
	// them, from the coded samples either way).
	replaysAsStreamed(t, p, clips, ep, len(cases))
}
