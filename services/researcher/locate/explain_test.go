package locate_test

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// TestMissesAreExplained: of three clips, one plays clearly, one plays far
// under the bed and one plays nowhere. The clip found has no miss; the
// buried one's best candidate is at its place, with its samples compared
// and a low SNR, refused by a stage past the landmarks; the absent one's
// best evidence is a handful of landmarks that chance explains. Asking
// for the misses changes no result.
func TestMissesAreExplained(t *testing.T) {
	const rate = 8000
	clear, buried, absent := locatetest.Jingle(70, 4, rate), locatetest.Jingle(71, 4, rate), locatetest.Jingle(72, 4, rate)
	ep := locatetest.Bed(73, 60, rate)
	locatetest.Insert(ep, clear, 10*rate, 0.5)
	locatetest.Insert(ep, buried, 30*rate, 0.08)
	episode := &media{key: "ep", b: locatetest.WAV(ep, rate)}
	clips := []*media{{key: "clear", b: locatetest.WAV(clear, rate)}, {key: "buried", b: locatetest.WAV(buried, rate)}, {key: "absent", b: locatetest.WAV(absent, rate)}}

	plain := locateItem(t, locate.NewLocator(), episode, clips...)
	explained := located{occ: map[int][]events.Occurrence{}, fail: map[int]error{}}
	misses := map[int]*events.Miss{}
	var as []researcher.Audio
	for _, c := range clips {
		as = append(as, c.audio())
	}
	err := locate.NewLocator().LocateExplained(context.Background(), episode.audio(), as, func(i int, occ []events.Occurrence, miss *events.Miss, failure error) error {
		if failure != nil {
			explained.fail[i] = failure
		} else {
			explained.occ[i] = occ
		}
		if miss != nil {
			misses[i] = miss
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain, explained) {
		t.Errorf("explaining changed the results: %+v, then %+v", plain, explained)
	}
	for i, m := range misses {
		for _, r := range m.Candidates {
			t.Logf("%s: %+v", clips[i].key, r)
		}
	}
	if len(explained.occ[0]) != 1 || len(explained.occ[1]) != 0 || len(explained.occ[2]) != 0 {
		t.Fatalf("found %+v: want the clear clip alone", explained.occ)
	}
	if _, ok := misses[0]; ok || len(misses) != 2 {
		t.Fatalf("misses of %v, want the buried and the absent clips'", keys(misses))
	}
	b := misses[1].Candidates
	if len(b) == 0 || math.Abs(float64(b[0].OffsetMS)/1000-30) > 0.1 || b[0].Stage == "votes" || b[0].Stage == "landmarks" || b[0].SNRDB == nil || b[0].Waveform <= 0 {
		t.Errorf("the buried clip's best candidate: %+v, want one at 30 s with its samples compared", b)
	} else if *b[0].SNRDB > 0 {
		t.Errorf("the buried clip at %.1f dB over the rest, want below 0", *b[0].SNRDB)
	}
	a := misses[2].Candidates
	if len(a) == 0 || a[0].Votes >= a[0].Needed || a[0].Confidence >= locate.Threshold || (a[0].Stage != "votes" && a[0].Stage != "landmarks") {
		t.Errorf("the absent clip's best candidate: %+v, want a few landmarks short of what is needed", a)
	}
	for i, m := range misses {
		for _, r := range m.Candidates {
			if locate.Stages[r.Stage] == "" || r.Hashes == 0 || r.Speed == 0 {
				t.Errorf("%s: %+v: an unknown stage or missing figures", clips[i].key, r)
			}
		}
	}
}

func keys(m map[int]*events.Miss) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}
