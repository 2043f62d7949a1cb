package locate

import (
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestAKeptClipPrintLeavesItsSpeedsSamplesOut: a clip print as kept
// (MarshalBinary) holds the samples of the clip as it is and not of its
// speed variants, only their count (its size, to the byte, says so); an
// index of the decoded prints makes a variant's samples only when they
// are first asked for, the very samples PrintClip made, and finds what
// an index of the prints as made finds in an episode where the clips play
// at a variant's speed, between two variants (its samples stretched from
// the clip's own) and as they are, to the last field. A print written
// before, with every variant's samples, decodes as it did; one leaving
// out the clip's own samples, or a variant of none, is refused.
func TestAKeptClipPrintLeavesItsSpeedsSamplesOut(t *testing.T) {
	const rate = 8000
	p, err := DefaultParams.Spanning(0.1)
	if err != nil {
		t.Fatal(err)
	}
	var clips []Clip
	for i, seconds := range []float64{6, 7.5, 5, 8} {
		clips = append(clips, Clip{Name: string(rune('a' + i)), Samples: locatetest.Jingle(uint64(40+i), seconds, rate)})
	}
	ep := locatetest.Bed(41, 80, rate)
	at := []float64{6, 24, 43, 61}
	for i, speed := range []float64{0.94, 1.05, 1, 1.1} {
		locatetest.Insert(ep, atSpeedOf(t, clips[i].Samples, rate, speed), int(at[i]*rate), 0.8)
	}
	var made, kept []*ClipPrint
	for _, c := range clips {
		cp, err := PrintClip(p, c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cp.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		size := 8
		for k, v := range cp.Low {
			size += 8 + 4 + 4 + 4 + 8*len(v.Hashes) + 4 + 4*len(v.Env)
			if k == 0 {
				size += 4 * len(v.Samples)
			}
		}
		if len(b) != size {
			t.Errorf("clip %s: a print of %d bytes, want %d (the samples of the clip as it is, no variant's)", c.Name, len(b), size)
		}
		var dec ClipPrint
		if err := dec.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		for k, v := range dec.Low {
			if k > 0 && (v.Samples != nil || v.Length != len(cp.Low[k].Samples)) {
				t.Errorf("clip %s, variant at %v decoded with %d samples of %d, want none of %d", c.Name, v.Speed, len(v.Samples), v.Length, len(cp.Low[k].Samples))
			}
		}
		dec.Name = cp.Name
		made, kept = append(made, cp), append(kept, &dec)
	}
	found := func(prints []*ClipPrint) ([]Occurrence, *Index) {
		x, err := NewIndexOfPrints(p, prints)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMatcher(x)
		m.Write(ep)
		return m.Finish(), x
	}
	want, _ := found(made)
	got, x := found(kept)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from the kept prints:\n%+v\nfrom the prints as made:\n%+v", got, want)
	}
	for i, w := range at {
		var n int
		for _, o := range want {
			if o.Clip == i && math.Abs(o.Offset-w) < 0.1 {
				n++
			}
		}
		if n != 1 {
			t.Errorf("clip %s: found %d times at %v s, want once (all: %+v)", clips[i].Name, n, w, want)
		}
	}
	// The variants nothing compared were never made; each made is the
	// one PrintClip made.
	var unmade int
	for k := range x.clips {
		ic := &x.clips[k]
		if ic.wave.samples == nil {
			unmade++
		}
		if v := made[ic.of].Low[slices.Index(p.Speeds, ic.speed)+1]; !slices.Equal(ic.samples(), v.Samples) || ic.n != len(v.Samples) {
			t.Errorf("clip %s at %v: made %d samples again, unlike PrintClip's %d", ic.name, ic.speed, len(ic.samples()), len(v.Samples))
		}
	}
	if unmade < len(x.clips)/2 {
		t.Errorf("%d of %d variants' samples made before they were asked for", len(x.clips)-unmade, len(x.clips))
	}

	// A print of before: every variant's samples in it.
	cp := made[0]
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cp.Low)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	for _, v := range cp.Low {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Speed))
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Landmarks))
		b = appendFloats(b, v.Samples)
		b = appendHashes(b, v.Hashes)
		b = appendFloats(b, v.Env)
	}
	var old ClipPrint
	if err := old.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	old.Name = cp.Name
	if !reflect.DeepEqual(&old, cp) {
		t.Error("a print with every variant's samples decodes unlike the print it was made of")
	}
	// Samples left out of the clip as it is, or a variant of no samples
	// left out: not a print.
	b = binary.LittleEndian.AppendUint32(nil, 1)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(1))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 100|omitted)
	if err := new(ClipPrint).UnmarshalBinary(b); err == nil {
		t.Error("a print leaving out the samples of the clip as it is decoded")
	}
	b, err = made[1].MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	at1 := 8 + 8 + 4 + 4 + 4*len(made[1].Low[0].Samples) + 4 + 8*len(made[1].Low[0].Hashes) + 4 + 4*len(made[1].Low[0].Env) + 8 + 4
	if got := binary.LittleEndian.Uint32(b[at1:]); got != uint32(len(made[1].Low[1].Samples))|omitted {
		t.Fatalf("the second variant's samples: %#x at byte %d, want %d left out", got, at1, len(made[1].Low[1].Samples))
	}
	binary.LittleEndian.PutUint32(b[at1:], omitted)
	if err := new(ClipPrint).UnmarshalBinary(b); err == nil {
		t.Error("a print leaving out a variant of no samples decoded")
	}
}
