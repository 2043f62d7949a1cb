package locate

import "testing"

// TestWaveSignificance: the samples' correlation is no evidence where
// unrelated passages reach it (0.31 with a 1.2 s clip, the tuning
// corpus's worst), strong evidence where a clip plays (0.44 over 1.5 s
// already adds more than a logistic slope), and grows with the
// correlation and the clip's length.
func TestWaveSignificance(t *testing.T) {
	if s := waveSignificance(0.31, 1.2); s > 0.1 {
		t.Errorf("0.31 over 1.2 s: significance %.2f, want none", s)
	}
	if s := waveSignificance(0.44, 1.5); s < SignificanceSlope {
		t.Errorf("0.44 over 1.5 s: significance %.2f, want at least %v", s, SignificanceSlope)
	}
	if s := waveSignificance(0.99, 1.5); s < SignificanceAt+3*SignificanceSlope {
		t.Errorf("0.99 over 1.5 s: significance %.2f, want enough alone for a confidence of 0.95", s)
	}
	for _, c := range []struct{ w, d float64 }{{0, 2}, {-0.5, 2}} {
		if s := waveSignificance(c.w, c.d); s != 0 {
			t.Errorf("%v over %v s: %.2f, want 0", c.w, c.d, s)
		}
	}
	prev := 0.0
	for w := 0.3; w <= 1; w += 0.05 {
		s := waveSignificance(w, 3)
		if s < prev {
			t.Errorf("significance falls from %.2f to %.2f at %.2f", prev, s, w)
		}
		prev = s
	}
	if waveSignificance(0.5, 10) <= waveSignificance(0.5, 1) {
		t.Error("a longer clip's correlation is no more evidence than a shorter one's")
	}
}
