package locatecmd_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/archivist/locatecmd"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

func writeWAV(t *testing.T, path string, x []float32, rate int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := locatetest.WriteWAV(f, x, rate); err != nil {
		t.Fatal(err)
	}
}

// TestLocateFindsEveryOccurrence: a jingle at 0 s and again at 20 s, a
// sting flush with the end of a 60 s episode (at 44.1 kHz, under a bed of
// other melodies and noise), a clip that occurs nowhere; each occurrence
// within 10 ms, nothing else.
func TestLocateFindsEveryOccurrence(t *testing.T) {
	const rate = 44100
	dir := t.TempDir()
	clips := filepath.Join(dir, "clips")
	os.Mkdir(clips, 0o755)
	jingle := locatetest.Jingle(1, 4, rate)
	sting := locatetest.Jingle(2, 3, rate)
	writeWAV(t, filepath.Join(clips, "jingle.wav"), jingle, rate)
	writeWAV(t, filepath.Join(clips, "sting.wav"), sting, rate)
	writeWAV(t, filepath.Join(clips, "absent.wav"), locatetest.Jingle(3, 5, rate), rate)
	os.WriteFile(filepath.Join(clips, "notes.txt"), []byte("not audio"), 0o644)
	ep := locatetest.Bed(9, 60, rate)
	locatetest.Insert(ep, jingle, 0, 0.7)
	locatetest.Insert(ep, jingle, 20*rate, 0.7)
	locatetest.Insert(ep, sting, len(ep)-len(sting), 0.7)
	episode := filepath.Join(dir, "episode.wav")
	writeWAV(t, episode, ep, rate)

	rs, err := locatecmd.Locate(context.Background(), episode, clips)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		clip   string
		offset float64
	}{{"jingle", 0}, {"jingle", 20}, {"sting", 57}}
	if len(rs) != len(want) {
		t.Fatalf("%d occurrences, want %d: %+v", len(rs), len(want), rs)
	}
	for i, w := range want {
		r := rs[i]
		if r.Clip != w.clip || math.Abs(float64(r.OffsetMS)/1000-w.offset) > 0.01 || r.Confidence < 0.5 {
			t.Errorf("occurrence %d: %+v, want %s at %.3f s", i, r, w.clip, w.offset)
		}
	}
	var out bytes.Buffer
	locatecmd.Print(&out, rs)
	if !strings.Contains(out.String(), "jingle  0:00:20.000") {
		t.Errorf("table:\n%s", out.String())
	}
	if _, err := locatecmd.Locate(context.Background(), episode, dir+"/nothing"); err == nil {
		t.Error("no error for a missing clips directory")
	}

	// --explain: the same occurrences, and the clip found nowhere with
	// its best candidates, each refused by a stage the table names.
	ers, misses, err := locatecmd.Explain(context.Background(), episode, clips)
	if err != nil || len(ers) != len(rs) {
		t.Fatalf("explained: %d occurrences (%v), want %d", len(ers), err, len(rs))
	}
	if len(misses) != 1 || misses[0].Clip != "absent" || len(misses[0].Candidates) == 0 {
		t.Fatalf("misses %+v, want the absent clip's", misses)
	}
	out.Reset()
	if err := locatecmd.PrintMisses(&out, misses); err != nil {
		t.Fatal(err)
	}
	if r := misses[0].Candidates[0]; !strings.Contains(out.String(), "NOT FOUND") || !strings.Contains(out.String(), "absent") ||
		!strings.Contains(out.String(), r.Stage+": ") || r.Votes >= r.Needed {
		t.Errorf("the absent clip: %+v, printed:\n%s", r, out.String())
	}
}
