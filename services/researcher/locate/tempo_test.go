package locate_test

import (
	"fmt"
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

// TestTempoOverAHeldChord: a 6.5 s jingle over a held chord (125 Hz and
// its harmonics), played 5 % slow or fast with its pitch kept, matches
// the passage "throughout" at its own factor a fraction of a second off:
// the chord correlates at any shift of its period, so its first and last
// quarters correlate as its whole does (clips of music on the corpus,
// their quarters 0.53 and 0.23, 0.46 and 0.48, were reported 0.14-0.21 s
// off at factor 1). Its samples place it at its tempo, where its band
// envelopes follow the passage better, and it is found once, at its place
// and tempo (20.05 s at factor 1 and 19.79 s, 0.2 s early, before); played
// as it is, it is found as it is; and replaying the episode's print finds
// the same. (Under a chord half again as loud, at tempo 1.05, its samples
// do not place it, and it is still reported at factor 1, 0.19 s early.)
func TestTempoOverAHeldChord(t *testing.T) {
	const rate, at = 8000, 20.0
	for _, c := range []struct {
		chord, tempo float64
	}{{0.2, 0.95}, {0.2, 1.05}, {0.3, 0.95}, {0.3, 1}} {
		x := locatetest.Jingle(300, 6.5, rate)
		for i := range x {
			s := 2 * math.Pi * 125 * float64(i) / rate
			x[i] += float32(c.chord * (math.Sin(s) + 0.6*math.Sin(2*s) + 0.4*math.Sin(3*s)))
		}
		ep := locatetest.Bed(78, 60, rate)
		played := x
		if c.tempo != 1 {
			played = locatetest.AtTempo(x, c.tempo)
		}
		locatetest.Insert(ep, played, at*rate, 0.8)
		clips := []locate.Clip{{Name: "jingle", Samples: x}}
		found := locateIn(t, locate.DefaultParams, clips, ep, locate.Threshold)
		if len(found) != 1 {
			t.Errorf("chord %.1f, tempo %.2f: %d occurrences, want 1: %+v", c.chord, c.tempo, len(found), found)
			continue
		}
		o := found[0]
		if math.Abs(o.Offset-at) > 0.1 || math.Abs(o.Tempo/c.tempo-1) > 0.015 {
			t.Errorf("chord %.1f, tempo %.2f: found at %.3f s, tempo %.3f (samples %.2f, envelopes %.2f); want %.3f s, tempo %.2f",
				c.chord, c.tempo, o.Offset, o.Tempo, o.Waveform, o.Similarity, at, c.tempo)
		}
		t.Logf("chord %.1f, tempo %.2f: at %.3f s, tempo %.3f, placed by its samples %v", c.chord, c.tempo, o.Offset, o.Tempo, o.Refined)
		replaysAsStreamed(t, locate.DefaultParams, clips, ep, 1)
	}
}

// TestShortClipAtTempo: a jingle of 1.7 s, under the 2 s from which a
// clip's factor is searched by its band envelopes, played 8 % slow with
// its pitch kept, is found once at its tempo (within 1.5 %) and its place
// to 30 ms, placed by its samples (repin), where it was reported at factor
// 1 (on the corpus, 1.9 s clips at tempo 1.10 were placed 0.09 s early,
// at 0.95 0.05 s late); a jingle as short played as it is stays at factor
// 1; and replaying the episode's print finds the same. (Of these synthetic
// jingles played 5 % to 10 % slow or fast, few keep the stretches pin
// needs; 23 occurrences of clips of 1.6 to 1.9 s on the corpora's tempo
// conditions did.)
func TestShortClipAtTempo(t *testing.T) {
	const rate = 8000
	cases := []struct {
		seed           uint64
		seconds, tempo float64
	}{{200, 1.9, 1}, {206, 1.7, 0.92}}
	var clips []locate.Clip
	var tempos []float64
	for _, c := range cases {
		clips = append(clips, locate.Clip{Name: fmt.Sprintf("%.1f s at %.2f", c.seconds, c.tempo), Samples: locatetest.Jingle(c.seed, c.seconds, rate)})
		tempos = append(tempos, c.tempo)
	}
	findsEachAtTempo(t, locatetest.Bed(78, 60, rate), 4, clips, tempos)
}

// TestRepeatingMusicAtTempo: a clip of music repeating a bar, played at
// another tempo, lines up a bar off its place as well as at it, but for
// the bar outside it; it is found once, at its start (to 30 ms) and its
// tempo, placed by its samples (periodOff, pinsPlaceBetter): the 14 bars
// of 1.9 s at 0.95 were found two bars early. Replay finds the same.
func TestRepeatingMusicAtTempo(t *testing.T) {
	const rate = 8000
	cases := []struct {
		seed       uint64
		bar, tempo float64
		bars       int
	}{{300, 2.3, 0.90, 12}, {301, 1.9, 0.95, 14}, {302, 2.1, 1.08, 12}}
	var clips []locate.Clip
	var tempos []float64
	for _, c := range cases {
		bar := locatetest.Jingle(c.seed, c.bar, rate)
		var x []float32
		for range c.bars {
			x = append(x, bar...)
		}
		clips = append(clips, locate.Clip{Name: fmt.Sprintf("%d bars of %.1f s at %.2f", c.bars, c.bar, c.tempo), Samples: x})
		tempos = append(tempos, c.tempo)
	}
	findsEachAtTempo(t, locatetest.Bed(79, 200, rate), 6, clips, tempos)
}

// findsEachAtTempo plays each clip at its tempo (as it is at 1) into the
// episode ep (8 kHz), the first from second pos on, 12 s apart, and fails
// t unless the locator finds each once, at its place (to 30 ms) and at
// speed 1 and its tempo (to 1.5 %; 1 exactly where it played as it is),
// placed by its samples, and a replay of the episode's print finds the
// same.
func findsEachAtTempo(t *testing.T, ep []float32, pos float64, clips []locate.Clip, tempos []float64) {
	t.Helper()
	const rate = 8000
	var at []float64
	for i, c := range clips {
		played := c.Samples
		if tempos[i] != 1 {
			played = locatetest.AtTempo(played, tempos[i])
		}
		locatetest.Insert(ep, played, int(pos*rate), 0.8)
		at = append(at, pos)
		pos += float64(len(played))/rate + 12
	}
	found := locateIn(t, locate.DefaultParams, clips, ep, locate.Threshold)
	seen := make([]int, len(clips))
	for _, o := range found {
		name, tempo := clips[o.Clip].Name, tempos[o.Clip]
		seen[o.Clip]++
		t.Logf("%s: at %.3f s (%.3f), tempo %.4f, confidence %.3f, samples %.3f", name, o.Offset, at[o.Clip], o.Tempo, o.Confidence, o.Waveform)
		if math.Abs(o.Offset-at[o.Clip]) > 0.03 {
			t.Errorf("%s found at %.3f s, want %.3f", name, o.Offset, at[o.Clip])
		}
		if o.Speed != 1 || math.Abs(o.Tempo/tempo-1) > 0.015 || tempo == 1 && o.Tempo != 1 {
			t.Errorf("%s found at speed %.4f, tempo %.4f; want 1 and %.2f", name, o.Speed, o.Tempo, tempo)
		}
		if !o.Refined {
			t.Errorf("%s not placed by its samples", name)
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("%s found %d times, want once", clips[i].Name, n)
		}
	}
	replaysAsStreamed(t, locate.DefaultParams, clips, ep, len(clips))
}
