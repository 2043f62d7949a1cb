package locate

import (
	"cmp"
	"slices"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestPostingsByRank: every one of the million hashes finds, by its rank
// among the hashes an index holds, exactly the postings its clips' and
// variants' landmarks make, by clip and frame; a hash no clip has finds
// none.
func TestPostingsByRank(t *testing.T) {
	var clips []Clip
	for i, seconds := range []float64{2, 5.5, 8, 3} {
		clips = append(clips, Clip{Name: string(rune('a' + i)), Samples: locatetest.Jingle(uint64(60+i), seconds, 8000)})
	}
	x, err := NewIndex(DefaultParams, clips)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]posting{}
	var prints []*ClipPrint
	for _, c := range clips {
		cp, err := PrintClip(DefaultParams, c)
		if err != nil {
			t.Fatal(err)
		}
		prints = append(prints, cp)
	}
	// The index's order of variants: every clip as it is, then every
	// clip at each speed (NewIndexOfPrints).
	i := 0
	for k := range DefaultParams.variants() {
		for _, cp := range prints {
			for _, h := range cp.Low[k].Hashes {
				want[h.H] = append(want[h.H], posting{clip: uint16(i), t: uint16(h.T)})
			}
			i++
		}
	}
	held := 0
	for h := range uint32(1 << HashBits) {
		w := want[h]
		slices.SortFunc(w, func(a, b posting) int { return cmp.Or(cmp.Compare(a.clip, b.clip), cmp.Compare(a.t, b.t)) })
		got := x.postings(h)
		if !slices.Equal(got, w) || (got == nil) != (w == nil) {
			t.Fatalf("hash %#x: postings %v, want %v", h, got, w)
		}
		if w != nil {
			held++
		}
	}
	if held < 1000 || len(x.start) != held+1 {
		t.Errorf("%d hashes held, %d starts: want a thousand and more, and one start more", held, len(x.start))
	}
}
