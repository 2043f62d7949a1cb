package locate

import "testing"

// TestSamplesPlaceARepeatingClip: of two overlapping alignments of one
// clip, the one whose samples match the passage clearly better is its
// place even where the other gathered more landmarks (by 0.2, or leaving
// half of what the other's leave unexplained where both match clearly),
// as long as both are certain or it has half the other's significance;
// otherwise the landmarks decide. The figures are the two alignments of the tuning
// corpora's cases (placedBetter). Between two speed variants of the clip
// at one place (explained), exactly one stands.
func TestSamplesPlaceARepeatingClip(t *testing.T) {
	at := func(idx int, start int32, sig, wave float64) scored {
		return scored{Occurrence: Occurrence{Clip: 7}, idx: idx, start: start, end: start + 300, sig: sig, wave: wave}
	}
	for _, c := range []struct {
		name       string
		place, off scored
		want       bool
	}{
		{"a ringtone a loop early (both certain)", at(1, 15839, 816, 0.997), at(1, 15737, 1732, 0.637), true},
		{"a bell a ring late (both certain)", at(1, 4069, 65.2, 0.974), at(1, 4100, 385, 0.378), true},
		{"half as significant", at(1, 100, 12, 0.9), at(1, 120, 20, 0.5), true},
		{"a third as significant, not certain", at(1, 100, 9, 0.9), at(1, 120, 27, 0.5), false},
		{"an alarm a beep early at 0 dB (half as significant)", at(1, 726, 6.44, 0.974), at(1, 694, 11.30, 0.877), true},
		{"samples not clearly better", at(1, 100, 816, 0.8), at(1, 120, 1732, 0.65), false},
		{"not half of what is left", at(1, 100, 816, 0.9), at(1, 120, 1732, 0.81), false},
		{"samples not clear", at(1, 100, 816, 0.45), at(1, 120, 1732, 0.1), false},
	} {
		if got := placedBetter(c.place, c.off); got != c.want {
			t.Errorf("%s: placedBetter %v, want %v", c.name, got, c.want)
		}
		if placedBetter(c.off, c.place) {
			t.Errorf("%s: the weaker samples place the clip too", c.name)
		}
		// The same two as speed variants of the clip (another index clip
		// each): one explains the other away, never both, never neither.
		v, w := c.place, c.off
		v.idx, w.idx = 1, 2
		var m Matcher
		vGone, wGone := m.explained(v, []scored{w}), m.explained(w, []scored{v})
		if vGone == wGone {
			t.Errorf("%s: as speed variants, explained %v and %v: want exactly one to stand", c.name, vGone, wGone)
		}
		if want := !c.want; vGone != want {
			t.Errorf("%s: as speed variants, the better placed one explained away: %v, want %v", c.name, vGone, want)
		}
	}
}

// TestSamplesPlaceAClipAtAnotherTempo: a clip played at another tempo
// matches in part at its own factor (its loudest seconds aligned): the
// alignment its samples placed at another factor (pin) is its place where
// the other's samples match in part only, or its band envelopes follow
// the passage better, and both are certain; not where the other's match
// throughout and look more alike (a clip under a bed: 0.82 on the
// corpus), not short of certain, and not where the two factors are one (a
// speed variant placed at the clip's own speed), where the samples
// compared say more; nor over one matching in part that its samples then
// repinned, no longer at its factor.
func TestSamplesPlaceAClipAtAnotherTempo(t *testing.T) {
	at := func(idx int, speed, tempo, sig, wave float64, pinned, partial bool) scored {
		return scored{Occurrence: Occurrence{Clip: 7, Speed: speed, Tempo: tempo}, idx: idx, start: 100, end: 400, sig: sig, wave: wave, corr: 0.5, pinned: pinned, partial: partial}
	}
	alike := func(s scored, corr float64) scored { s.corr = corr; return s }
	for _, c := range []struct {
		name       string
		place, off scored
	}{
		{"at tempo 0.9, against its samples in part", at(1, 1, 0.9, 300, 0, true, false), at(1, 1, 1, 600, 0.56, false, true)},
		{"at speed 0.95, against a variant's samples in part", at(2, 0.949, 1, 300, 0, true, false), at(1, 0.96, 1, 600, 0.6, false, true)},
		{"the clip as it is, against a variant placed at its speed", at(1, 1, 1, 600, 0.87, false, false), at(2, 0.98*1.0204, 1, 300, 0, true, false)},
		{"its samples throughout, against a factor placed", alike(at(1, 1, 1, 200, 0.82, false, false), 0.35), alike(at(1, 1, 1.011, 300, 0, true, false), 0.32)},
		{"at tempo 0.9 and more alike, against its samples throughout", alike(at(1, 1, 0.9, 300, 0, true, false), 0.9), alike(at(1, 1, 1, 600, 0.56, false, false), 0.86)},
	} {
		placesOver(t, c.place, c.off, c.name, c.name+": the other")
	}
	if weak := at(1, 1, 0.9, certain/2, 0, true, false); placedBetter(weak, at(1, 1, 1, 600, 0.56, false, true)) {
		t.Error("a factor placed by samples, landmarks short of certain: placed better")
	}
	// One matching in part at its factor, then repinned by its samples,
	// is not at its variant's factor: a clip at tempo 0.90 in seed 15's
	// corpus, repinned to 0.8952, 39 ms from its place (77.5 of
	// significance, 12 stretches on its line), fell to one pinned at
	// 0.9004 0.23 s early (41.1, 9).
	repinned := at(1, 1, 0.8952, 77.5, 0.002, false, true)
	repinned.repinned, repinned.Refined, repinned.onLine = true, true, 12
	early := alike(at(1, 1, 0.9004, 41.1, 0, true, false), 0.412)
	early.scaled, early.Refined, early.onLine = true, true, 9
	if placedBetter(early, repinned) {
		t.Error("pinned 0.23 s early, against one its samples repinned near its place: placed better")
	}
}

// TestSamplesPlaceOverEnvelopesAtOneFactor: of two certain alignments of
// a clip both placed at another factor (a 30 s clip of music played 10 %
// fast, on the corpus: its start, and a bar later, where the music repeats
// itself), the one its samples placed (pin) is its place, where its band
// envelopes follow the passage at least as well, over the one its
// envelopes alone placed, however many more landmarks that one gathered;
// not where its envelopes follow less well.
func TestSamplesPlaceOverEnvelopesAtOneFactor(t *testing.T) {
	at := func(start int32, sig, corr float64, pinned bool) scored {
		return scored{Occurrence: Occurrence{Clip: 7, Speed: 1, Tempo: 1.10}, idx: 1, start: start, end: start + 850, sig: sig, corr: corr, pinned: pinned, scaled: true}
	}
	bySamples, byEnvelopes := at(0, 45.0, 0.929, true), at(66, 66.3, 0.595, false)
	placesOver(t, bySamples, byEnvelopes, "the alignment the samples placed", "the alignment the envelopes alone placed")
	if worse := at(0, 45.0, 0.5, true); placedBetter(worse, byEnvelopes) {
		t.Error("the samples' alignment, its envelopes following less well: placed better")
	}
	if weak := at(0, certain/2, 0.929, true); placedBetter(weak, byEnvelopes) {
		t.Error("the samples' alignment, landmarks short of certain: placed better")
	}
}

// TestRepinnedOverItsPartialSelf: of two certain alignments of one
// variant of a clip at its factor, one whose samples match in part only
// (a 5.8 s clip played at tempo 0.95, on the corpus: 210.7 of significance
// 0.2 s after its start, its samples 0.26) and one its samples placed at
// another factor once reported (repin: 150.2, at 0.948, to 9 ms), the one
// placed so is its place; not the alignment of another variant of the
// clip, and not where either is short of certain.
func TestRepinnedOverItsPartialSelf(t *testing.T) {
	at := func(idx int, start int32, sig, wave float64, repinned, partial bool) scored {
		return scored{Occurrence: Occurrence{Clip: 7, Speed: 1, Tempo: 1}, idx: idx, start: start, end: start + 190, sig: sig, wave: wave, corr: 0.8, repinned: repinned, partial: partial}
	}
	placed, part := at(1, 9164, 150.2, 0.358, true, false), at(1, 9172, 210.7, 0.256, false, true)
	placed.Tempo, placed.Refined = 0.948, true // placed by its samples
	placesOver(t, placed, part, "the repinned alignment", "the partial alignment")
	other, weak, whole := placed, placed, part
	other.idx, weak.sig, whole.partial = 2, certain/2, false
	if placedBetter(other, part) {
		t.Error("another variant's repinned alignment: placed better")
	}
	if placedBetter(weak, part) {
		t.Error("a repinned alignment short of certain: placed better")
	}
	if placedBetter(placed, whole) {
		t.Error("over an alignment whose samples match throughout: placed better")
	}
}

// TestRepinnedNearerThanAWholeMatch: of two certain alignments of one
// variant of a clip at its factor, one whose samples match throughout but
// less (a 6.5 s tongue drum at tempo 0.95, a note a second, on the corpus:
// 247.9 of significance 0.25 s after its place, its samples 0.578) and
// one whose samples matched clearly and better there, in part, and then
// placed it at another factor (repin: 123.5, 0.675, at 0.9492, to 2 ms),
// the one placed so is its place; not where its samples matched less
// than clearly or no better, where its band envelopes alone moved it, for
// another variant of the clip, short of certain, or over an alignment
// placed at another factor too.
func TestRepinnedNearerThanAWholeMatch(t *testing.T) {
	at := func(start int32, sig, wave float64) scored {
		return scored{Occurrence: Occurrence{Clip: 1, Speed: 1, Tempo: 1}, idx: 1, start: start, end: start + 203, sig: sig, wave: wave, corr: 0.54}
	}
	placed, whole := at(14537, 123.5, 0.675), at(14543, 247.9, 0.578)
	placed.Tempo, placed.Refined, placed.repinned, placed.partial = 0.9492, true, true, true
	placesOver(t, placed, whole, "the repinned alignment", "the alignment matching throughout")
	unclear, worse, byEnvelopes, other, weak := placed, placed, placed, placed, placed
	unclear.wave, worse.wave, byEnvelopes.Refined, other.idx, weak.sig = 0.45, 0.578, false, 2, certain/2
	noneOver(t, map[string]scored{"samples no better": worse,
		"placed by its envelopes": byEnvelopes, "another variant's": other, "short of certain": weak}, whole)
	if lower := at(14543, 247.9, 0.40); placedBetter(unclear, lower) {
		t.Error("samples short of clear, over samples matching less: placed better")
	}
	moved, scaled := whole, whole
	moved.repinned, moved.Refined, moved.Tempo, scaled.scaled, scaled.Tempo = true, true, 0.97, true, 0.97
	if placedBetter(placed, moved) || placedBetter(placed, scaled) {
		t.Error("over an alignment placed at another factor too: placed better")
	}
}

// TestPartialOverItsEnvelopesRepinnedSelf: of two certain alignments of
// one variant of a clip, one at its factor whose samples match in part
// (a 4.0 s clip repeating a sound every third of a second, at tempo 0.95,
// on the corpus: 157.8 of significance 62 ms after its place, its band
// envelopes following 0.868) and one its envelopes alone placed at another
// factor once reported (repin: 191.1, at 0.899 and 0.84 s late, its
// envelopes following 0.583 there), the one at its factor is the better
// placed; not where the other's envelopes follow as well, its samples
// placed it, it is another variant's, or short of certain.
func TestPartialOverItsEnvelopesRepinnedSelf(t *testing.T) {
	part, moved := repeatingClip(alignment{5732, 157.8, 0.868, 0.335}, alignment{5774, 191.1, 0.538, 0.062}, 0.899, 0.583)
	placesOver(t, part, moved, "the partial alignment", "the alignment its envelopes repinned")
	following, bySamples, other, weak := moved, moved, moved, moved
	following.repinCorr, bySamples.Refined, other.idx, weak.sig = 0.9, true, 4, certain/2
	for name, c := range map[string]scored{"its envelopes following better": following, "placed by its samples": bySamples,
		"another variant's": other, "short of certain": weak} {
		if placedBetter(part, c) {
			t.Errorf("over one %s: placed better", name)
		}
	}
	whole := part
	whole.partial = false
	if placedBetter(whole, moved) {
		t.Error("an alignment matching throughout: placed better (its samples say which)")
	}
}

// TestEnvelopesRepinnedOverItsPartialSelf: the clip of
// TestPartialOverItsEnvelopesRepinnedSelf at tempo 1.10: a certain
// alignment at its factor whose samples match in part (36.2 of
// significance 0.31 s late, its envelopes following 0.519) and one its
// envelopes alone moved once reported, confident but short of certain
// (24.2, to 9 ms at 1.105, following 0.634 there): the one they moved is
// the better placed; not where its envelopes follow no better, it is not
// confident, or the other is not certain.
func TestEnvelopesRepinnedOverItsPartialSelf(t *testing.T) {
	part, moved := repeatingClip(alignment{4053, 36.2, 0.519, 0.123}, alignment{4041, 24.2, 0.572, 0.233}, 1.105, 0.634)
	placesOver(t, moved, part, "the alignment its envelopes repinned", "the partial alignment")
	following, faint, unsure := moved, moved, part
	following.repinCorr, faint.sig, unsure.sig = 0.5, SignificanceAt-1, certain-1
	if placedBetter(following, part) || placedBetter(faint, part) || placedBetter(moved, unsure) {
		t.Error("its envelopes following no better, itself not confident, or the other not certain: placed better")
	}
}

// alignment is a candidate's start frame, significance, band envelopes'
// similarity at its variant's factor and samples' correlation there.
type alignment struct {
	start           int32
	sig, corr, wave float64
}

// repeatingClip is the pair the tests of a 4.0 s clip repeating a sound
// every third of a second weigh (TestPartialOverItsEnvelopesRepinnedSelf,
// TestEnvelopesRepinnedOverItsPartialSelf, TestStretchesPlaceOverEnvelopes),
// of one variant of it: part, at its factor, where its samples match in
// part and placed it; moved, moved by its band envelopes alone to factor r
// once reported, following the passage rc there.
func repeatingClip(p, m alignment, r, rc float64) (part, moved scored) {
	at := func(a alignment) scored {
		return scored{Occurrence: Occurrence{Clip: 13, Speed: 1, Tempo: 1}, idx: 3, start: a.start, end: a.start + 125, sig: a.sig, wave: a.wave, corr: a.corr}
	}
	part, moved = at(p), at(m)
	part.partial, part.Refined = true, true
	moved.Tempo, moved.repinned, moved.repinCorr = r, true, rc
	return part, moved
}

// TestStretchesPlaceOverEnvelopes: the clip of repeatingClip at tempo
// 1.10 in another corpus: one alignment its band envelopes alone placed at
// 1.105, 0.27 s early (43.0 of significance, 6 of its 12 stretches on its
// line), and one its samples repinned to 1.0973, to 1 ms (32.1, 10 on
// theirs): the one its samples placed is the better placed; not with as
// few stretches on its line, short of certain, where its envelopes placed
// it too, or for another variant.
func TestStretchesPlaceOverEnvelopes(t *testing.T) {
	bySamples, byEnvelopes := repeatingClip(alignment{9745, 32.1, 0.436, 0.181}, alignment{9727, 43.0, 0.567, 0}, 1.105, 0)
	bySamples.partial, bySamples.repinned, bySamples.Tempo, bySamples.onLine = false, true, 1.0973, 10
	byEnvelopes.repinned, byEnvelopes.scaled, byEnvelopes.onLine = false, true, 6
	placesOver(t, bySamples, byEnvelopes, "the alignment its samples placed", "the alignment its envelopes placed")
	fewer, weak, envelopesToo, other := bySamples, bySamples, bySamples, bySamples
	fewer.onLine, weak.sig, envelopesToo.Refined, other.idx = 6, certain-1, false, 4
	noneOver(t, map[string]scored{"as few stretches": fewer, "short of certain": weak, "placed by its envelopes too": envelopesToo, "another variant's": other}, byEnvelopes)
}

// TestPinsPlaceRepeatingMusic: a 30 s clip of music repeating a bar, at
// tempo 0.95 in seed 15's corpus: two certain alignments of one variant,
// both placed by their samples at another factor (pin), one 9.7 s after
// its place (136.2 of significance, 5 of its 12 stretches on its line,
// its band envelopes following 0.379) and one at its place, to 2 ms
// (65.2, 12, 0.910): the one with more stretches on its line and its
// envelopes following better is the better placed; not with as few
// stretches, envelopes following no better, short of certain, for another
// variant, or resampled to another speed (respeed).
func TestPinsPlaceRepeatingMusic(t *testing.T) {
	at := func(start int32, sig, corr float64, on int) scored {
		return scored{Occurrence: Occurrence{Clip: 30, Speed: 1, Tempo: 0.95, Refined: true}, idx: 5, start: start, end: start + 987,
			sig: sig, corr: corr, pinned: true, scaled: true, onLine: on}
	}
	place, off := at(5459, 65.2, 0.910, 12), at(5762, 136.2, 0.379, 5)
	placesOver(t, place, off, "its place", "9.7 s off")
	fewer, alike, weak, other, resampled := place, place, place, place, place
	fewer.onLine, alike.corr, weak.sig, other.idx, resampled.respeeded = 5, 0.379, certain-1, 6, true
	noneOver(t, map[string]scored{"as few stretches": fewer, "envelopes no better": alike, "short of certain": weak,
		"another variant's": other, "resampled": resampled}, off)
}

// placesOver fails t unless placedBetter puts better over worse and not
// worse over better; betterIs and worseIs name them in the failures.
func placesOver(t *testing.T, better, worse scored, betterIs, worseIs string) {
	t.Helper()
	if !placedBetter(better, worse) {
		t.Errorf("%s: not placed better", betterIs)
	}
	if placedBetter(worse, better) {
		t.Errorf("%s: placed better", worseIs)
	}
}

// noneOver fails t where placedBetter puts any of cs over other.
func noneOver(t *testing.T, cs map[string]scored, other scored) {
	t.Helper()
	for name, c := range cs {
		if placedBetter(c, other) {
			t.Errorf("%s: placed better", name)
		}
	}
}
