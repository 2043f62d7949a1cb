package locate_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// recording is an episode's prints and samples as a Matcher recorded them.
type recording struct {
	low, lowSamples, high, highSamples bytes.Buffer
	lowInfo, highInfo                  locate.PrintInfo
}

func (r *recording) prints() (low, high *locate.Print) {
	low = &locate.Print{Prints: bytes.NewReader(r.low.Bytes()), Samples: bytes.NewReader(r.lowSamples.Bytes()), Info: r.lowInfo}
	if r.highInfo.Frames > 0 {
		high = &locate.Print{Prints: bytes.NewReader(r.high.Bytes()), Samples: bytes.NewReader(r.highSamples.Bytes()), Info: r.highInfo}
	}
	return low, high
}

// streamRecording streams s through x, recording its prints, and returns
// what it found.
func streamRecording(t testing.TB, x *locate.Index, s audio.Stream, minConf float64) ([]locate.Occurrence, *recording) {
	t.Helper()
	rec := &recording{}
	low, high := locate.NewPrintWriter(&rec.low, &rec.lowSamples), locate.NewPrintWriter(&rec.high, &rec.highSamples)
	m := locate.NewMatcher(x)
	m.MinConfidence = minConf
	m.Record(low, high)
	if err := m.Stream(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	occ := m.Finish()
	var err error
	if rec.lowInfo, err = low.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.highInfo, err = high.Close(); err != nil {
		t.Fatal(err)
	}
	return occ, rec
}

// replay replays a recording through x.
func replay(t testing.TB, x *locate.Index, rec *recording, minConf float64) []locate.Occurrence {
	t.Helper()
	m := locate.NewMatcher(x)
	m.MinConfidence = minConf
	low, high := rec.prints()
	if err := m.Replay(context.Background(), low, high); err != nil {
		t.Fatal(err)
	}
	return m.Finish()
}

// replaysAsStreamed checks that replaying the print of episode ep (at
// 8 kHz), recorded as it streams through the clips indexed with p, finds
// what streaming it does to the last field, and that streaming finds want
// occurrences.
func replaysAsStreamed(t *testing.T, p locate.Params, clips []locate.Clip, ep []float32, want int) {
	t.Helper()
	x, err := locate.NewIndex(p, clips)
	if err != nil {
		t.Fatal(err)
	}
	streamed, rec := streamRecording(t, x, audio.Samples(ep, 8000), locate.Threshold)
	if replayed := replay(t, x, rec, locate.Threshold); !reflect.DeepEqual(replayed, streamed) {
		t.Errorf("replayed:\n%+v\nstreamed:\n%+v", replayed, streamed)
	}
	if len(streamed) != want {
		t.Errorf("streamed from a recording: %d occurrences, want %d", len(streamed), want)
	}
}

// TestReplayingAPrintIsStreamingTheEpisode: for every episode and
// condition of the mini corpus, with all its clips, far below the
// reporting threshold (where many more candidates are decided), and in
// two conditions of one episode at the threshold and with items of
// eight (as work items are), replaying the print an episode's stream
// recorded through one index, through another index, finds what
// streaming the episode through that index finds, to the last field.
func TestReplayingAPrintIsStreamingTheEpisode(t *testing.T) {
	c := loadCorpus(t, filepath.Join(audioCorpus(t, "replaying a recorded print finds what streaming the recorded episode finds"), "mini"))
	var prints []*locate.ClipPrint // each clip fingerprinted once, as kept prints are
	for _, clip := range c.clips {
		cp, err := locate.PrintClip(locate.DefaultParams, clip)
		if err != nil {
			t.Fatal(err)
		}
		prints = append(prints, cp)
	}
	full, err := locate.NewIndexOfPrints(locate.DefaultParams, prints)
	if err != nil {
		t.Fatal(err)
	}
	indexes := []*locate.Index{full}
	for i := 0; i < len(c.clips); i += 8 {
		x, err := locate.NewIndexOfPrints(locate.DefaultParams, prints[i:min(i+8, len(c.clips))])
		if err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, x)
	}
	compared := 0
	for _, ep := range c.episodes {
		for cond := range c.conditions {
			if raceEnabled && (ep != c.episodes[0] || cond != "clean" && cond != "lp4k_mp3_64k") {
				continue // the race detector's run: two codecs of one episode
			}
			path := c.episodeFile(ep, cond)
			var rec *recording
			var recorded []locate.Occurrence
			readFile(t, path, func(s audio.Stream) error {
				recorded, rec = streamRecording(t, full, s, 0.01)
				return nil
			})
			if got := replay(t, full, rec, 0.01); !reflect.DeepEqual(got, recorded) {
				t.Errorf("%s/%s: replayed %d occurrences, streamed %d:\n%+v\n%+v", ep, cond, len(got), len(recorded), got, recorded)
			}
			compared += len(recorded)
			for xi, x := range indexes {
				some := ep == c.episodes[0] && (cond == "clean" || cond == "snr5" && !raceEnabled)
				if xi > 0 && (!some || raceEnabled && xi > 2) {
					continue // items of eight: in two conditions of one episode
				}
				for _, minConf := range []float64{0.01, locate.Threshold} {
					if xi == 0 && minConf == 0.01 || minConf == locate.Threshold && xi > 0 {
						continue // compared above; items at the threshold
					}
					live, _ := locateFile(t, x, path, minConf)
					got := replay(t, x, rec, minConf)
					if !reflect.DeepEqual(got, live) {
						t.Errorf("%s/%s index %d, confidence from %g: replayed %d occurrences, streamed %d:\n%+v\n%+v", ep, cond, xi, minConf, len(got), len(live), got, live)
					}
					compared += len(live)
				}
			}
		}
	}
	if compared == 0 {
		t.Fatal("nothing was found to compare")
	}
	t.Logf("%d occurrences replayed as streamed", compared)
}

// TestReplayingTheHighBand: a ringing above the analysed band, found in
// the episode's high band, is found by replaying its print as by
// streaming it, beside clips of the low band; and an index searching
// nothing there replays the same print without its high band.
func TestReplayingTheHighBand(t *testing.T) {
	const rate = 32000
	ring := locatetest.Ring(41, 5, rate)
	jingle := locatetest.Jingle(43, 4, rate)
	ep := locatetest.Bed(42, 60, rate)
	locatetest.Insert(ep, ring, 9*rate+123, 0.125)
	locatetest.Insert(ep, faster(ring, 1.02), 27*rate+45, 0.125)
	locatetest.Insert(ep, jingle, 41*rate+7, 0.5)
	var clips []locate.Clip
	for i, x := range [][]float32{ring, jingle} {
		c, err := locate.ReadClip(fmt.Sprint("clip", i), wavStream(t, x, rate), locate.DefaultParams)
		if err != nil {
			t.Fatal(err)
		}
		clips = append(clips, c)
	}
	both, err := locate.NewIndex(locate.DefaultParams, clips)
	if err != nil {
		t.Fatal(err)
	}
	low, err := locate.NewIndex(locate.DefaultParams, clips[1:])
	if err != nil {
		t.Fatal(err)
	}
	if !both.HighBand() || low.HighBand() {
		t.Fatalf("high band searched: %v and %v, want true and false", both.HighBand(), low.HighBand())
	}
	live, rec := streamRecording(t, both, wavStream(t, ep, rate), locate.Threshold)
	if len(live) != 3 {
		t.Fatalf("streamed: %+v, want the ringing twice and the jingle", live)
	}
	if rec.highInfo.Samples == 0 || rec.highInfo.Frames == 0 {
		t.Fatalf("no high band recorded: %+v", rec.highInfo)
	}
	if got := replay(t, both, rec, locate.Threshold); !reflect.DeepEqual(got, live) {
		t.Errorf("replayed %+v\nstreamed %+v", got, live)
	}
	m := locate.NewMatcher(low)
	if err := m.Stream(context.Background(), wavStream(t, ep, rate)); err != nil {
		t.Fatal(err)
	}
	if want, got := m.Finish(), replay(t, low, rec, locate.Threshold); !reflect.DeepEqual(got, want) {
		t.Errorf("low band only: replayed %+v\nstreamed %+v", got, want)
	}
}

// TestAPrintThatIsNotOneFails: a print cut short, or holding peaks no
// fingerprinter picks, or samples cut short, is an error, never a result.
func TestAPrintThatIsNotOneFails(t *testing.T) {
	ep := locatetest.Bed(7, 20, 8000)
	jingle := locatetest.Jingle(8, 3, 8000)
	locatetest.Insert(ep, jingle, 5*8000, 0.5)
	x, err := locate.NewIndex(locate.DefaultParams, []locate.Clip{{Name: "j", Samples: jingle}})
	if err != nil {
		t.Fatal(err)
	}
	_, rec := streamRecording(t, x, audio.Samples(ep, 8000), locate.Threshold)
	b, samples := rec.low.Bytes(), rec.lowSamples.Bytes()
	// The record of frame PeakDT: its envelopes, one frame's peaks (the
	// first frame's), their number and their bins.
	at := locate.DefaultParams.PeakDT * (locate.Bands + 1)
	if b[at+locate.Bands] != 1 || b[at+locate.Bands+1] == 0 {
		t.Fatalf("frame %d's record: %x, want the peaks of one frame", locate.DefaultParams.PeakDT, b[at:at+locate.Bands+8])
	}
	with := func(i int, v byte) []byte {
		c := append([]byte{}, b...)
		c[i] = v
		return c
	}
	for name, bad := range map[string][2][]byte{
		"cut short":                    {b[:len(b)-3], samples},
		"a peak below the bins":        {with(at+locate.Bands+2, 1), samples},
		"more peaks than a frame has":  {with(at+locate.Bands+1, 200), samples},
		"more frames' peaks than come": {with(at+locate.Bands, 9), samples},
		"samples cut short":            {b, samples[:len(samples)-100]},
	} {
		m := locate.NewMatcher(x)
		m.MinConfidence = 0.001 // every candidate's samples are read
		err := m.Replay(context.Background(), &locate.Print{Prints: bytes.NewReader(bad[0]), Samples: bytes.NewReader(bad[1]), Info: rec.lowInfo}, nil)
		if err == nil {
			t.Errorf("%s: replayed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestPrintsAreCompact: an episode's print and samples, either band, take
// at most 20 MB an episode-hour (the bound; 155 MB for the low
// band before): measured on a two-minute episode, and at most in any
// episode (a frame's record holding its most peaks), and the print finds
// what streaming found.
func TestPrintsAreCompact(t *testing.T) {
	const rate, seconds = 32000, 120
	ep := locatetest.Bed(11, seconds, rate)
	ring := locatetest.Ring(12, 4, rate)
	locatetest.Insert(ep, ring, 30*rate, 0.25)
	clip, err := locate.ReadClip("ring", wavStream(t, ring, rate), locate.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	x, err := locate.NewIndex(locate.DefaultParams, []locate.Clip{clip})
	if err != nil {
		t.Fatal(err)
	}
	live, rec := streamRecording(t, x, wavStream(t, ep, rate), locate.Threshold)
	if len(live) != 1 {
		t.Fatalf("streamed: %+v, want the ringing once", live)
	}
	if got := replay(t, x, rec, locate.Threshold); !reflect.DeepEqual(got, live) {
		t.Errorf("replayed %+v\nstreamed %+v", got, live)
	}
	p := locate.DefaultParams
	framesAnHour := 3600 * float64(p.Rate) / float64(p.Hop)
	// A frame's envelopes, its record's count of frames picked, and one
	// frame's peaks with their number; the samples at 4 bits and a
	// 4-byte header every 4096.
	most := framesAnHour*float64(locate.Bands+2+p.PeaksPerFrame)/1e6 + 3600*float64(p.Rate)*(0.5+4.0/4096)/1e6
	if most > 20 {
		t.Errorf("at most %.1f MB an episode-hour, want at most 20", most)
	}
	perHour := func(n int) float64 { return float64(n) / 1e6 * 3600 / seconds }
	for _, band := range []struct {
		name            string
		prints, samples *bytes.Buffer
		info            locate.PrintInfo
	}{{"low", &rec.low, &rec.lowSamples, rec.lowInfo}, {"high", &rec.high, &rec.highSamples, rec.highInfo}} {
		p, s := perHour(band.prints.Len()), perHour(band.samples.Len())
		t.Logf("%s band: %.1f MB an episode-hour, at most %.1f (print %.2f, samples %.2f; %d frames)", band.name, p+s, most, p, s, band.info.Frames)
		if p+s > most+0.01 {
			t.Errorf("%s band: %.2f MB an episode-hour, more than the most a print takes (%.2f)", band.name, p+s, most)
		}
	}
}
