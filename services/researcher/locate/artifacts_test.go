package locate_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/researcher/artifact"
	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// media is audio in memory whose opens are counted.
type media struct {
	key   string
	b     []byte
	opens atomic.Int32
}

func (m *media) audio() researcher.Audio {
	sum := sha256.Sum256(m.b)
	return researcher.Audio{Ref: events.AudioRef{Key: m.key, Media: events.Media{Key: m.key + ".wav", SHA256: hex.EncodeToString(sum[:])}},
		Open: func(context.Context) (io.ReadCloser, error) {
			m.opens.Add(1)
			return io.NopCloser(bytes.NewReader(m.b)), nil
		}}
}

type located struct {
	occ  map[int][]events.Occurrence
	fail map[int]error
}

func locateItem(t *testing.T, l *locate.Locator, ep *media, clips ...*media) located {
	t.Helper()
	var as []researcher.Audio
	for _, c := range clips {
		as = append(as, c.audio())
	}
	got := located{occ: map[int][]events.Occurrence{}, fail: map[int]error{}}
	err := l.Locate(context.Background(), ep.audio(), as, func(i int, occ []events.Occurrence, failure error) error {
		if failure != nil {
			got.fail[i] = failure
		} else {
			got.occ[i] = occ
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func newArtifacts(t *testing.T, store blob.Store, dir string) *artifact.Cache {
	t.Helper()
	c, err := artifact.New(artifact.Options{Dir: dir, MaxBytes: 1 << 30, Store: store, Key: []byte("a test key of the researchers")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEachEpisodeAndClipIsAnalysedOnce: with artifacts kept, the first
// work item of an episode decodes it and every later one (of other
// clips, on this researcher or another sharing the blob store) replays
// its print without opening its audio; a clip is decoded once whatever
// the items it is in; the high band is analysed the first time a clip
// searched for there comes; a corrupt print is discarded and the episode
// analysed again; and every result is the one analysing the audio each
// time gives.
func TestEachEpisodeAndClipIsAnalysedOnce(t *testing.T) {
	const rate = 32000
	ring := locatetest.Ring(41, 5, rate)
	var jingles [][]float32
	for i := range 4 {
		jingles = append(jingles, locatetest.Jingle(uint64(50+i), 3+float64(i)/2, rate))
	}
	ep := locatetest.Bed(42, 90, rate)
	locatetest.Insert(ep, ring, 9*rate+123, 0.125)
	for i, j := range jingles {
		locatetest.Insert(ep, j, (20+15*i)*rate+31*i, 0.5)
	}
	episode := &media{key: "ep", b: locatetest.WAV(ep, rate)}
	var clips []*media
	for i, j := range jingles {
		clips = append(clips, &media{key: fmt.Sprint("jingle", i), b: locatetest.WAV(j, rate)})
	}
	ringClip := &media{key: "ring", b: locatetest.WAV(ring, rate)}

	plain := locate.NewLocator()            // analyses everything every time
	want := func(clips ...*media) located { // of copies: their opens are not counted
		var cs []*media
		for _, c := range clips {
			cs = append(cs, &media{key: c.key, b: c.b})
		}
		return locateItem(t, plain, &media{key: "ep", b: episode.b}, cs...)
	}

	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a := locate.NewLocator()
	a.Artifacts = newArtifacts(t, store, dir)
	check := func(name string, got, want located, opens int32) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: found %+v, want %+v", name, got, want)
		}
		if n := episode.opens.Swap(0); n != opens {
			t.Errorf("%s: the episode's audio was opened %d times, want %d", name, n, opens)
		}
	}
	check("first item", locateItem(t, a, episode, clips[0], clips[1]), want(clips[0], clips[1]), 1)
	check("second item", locateItem(t, a, episode, clips[2], clips[3]), want(clips[2], clips[3]), 0)
	check("a clip again", locateItem(t, a, episode, clips[1], clips[3]), want(clips[1], clips[3]), 0)
	for _, c := range clips {
		if n := c.opens.Load(); n != 1 {
			t.Errorf("%s was opened %d times, want once", c.key, n)
		}
	}
	if len(want(ringClip).occ[0]) != 1 {
		t.Fatal("the ringing is not found in the high band")
	}
	check("the high band's first clip", locateItem(t, a, episode, ringClip, clips[0]), want(ringClip, clips[0]), 1)
	check("the high band again", locateItem(t, a, episode, clips[2], ringClip), want(clips[2], ringClip), 0)

	// Another researcher, its own directory, the same store (once the
	// first's uploads are done).
	if err := a.Artifacts.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := locate.NewLocator()
	b.Artifacts = newArtifacts(t, store, t.TempDir())
	check("another researcher", locateItem(t, b, episode, ringClip, clips[3]), want(ringClip, clips[3]), 0)

	// A flipped byte in the kept print: found, discarded, analysed again.
	var printPath string
	filepath.Walk(dir, func(p string, info os.FileInfo, _ error) error {
		if filepath.Base(p) == "low.print" {
			printPath = p
		}
		return nil
	})
	if printPath == "" {
		t.Fatal("no low.print in the cache")
	}
	raw, err := os.ReadFile(printPath)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/3] ^= 0x40
	if err := os.WriteFile(printPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	check("a corrupt print", locateItem(t, a, episode, clips[0], clips[2]), want(clips[0], clips[2]), 1)
	check("after a corrupt print", locateItem(t, a, episode, clips[1]), want(clips[1]), 0)
	if n := ringClip.opens.Load(); n != 1 {
		t.Errorf("the ringing was opened %d times, want once", n)
	}

	// Audio whose object is no longer its bytes is its fault, kept
	// print or not: a clip's alone, the episode's the item's.
	bad := func(m *media) researcher.Audio {
		au := m.audio()
		au.Check = func(context.Context) error {
			return &researcher.MediaMismatchError{Key: au.Ref.Media.Key, Want: au.Ref.Media.SHA256, Got: "other"}
		}
		return au
	}
	var failed error
	err = a.Locate(context.Background(), episode.audio(), []researcher.Audio{bad(clips[0]), clips[1].audio()}, func(i int, occ []events.Occurrence, failure error) error {
		if i == 0 {
			failed = failure
		}
		return nil
	})
	if err != nil || !researcher.IsClipFault(failed) {
		t.Errorf("a clip whose object changed: item %v, clip %v; want the clip's fault alone", err, failed)
	}
	err = a.Locate(context.Background(), bad(episode), []researcher.Audio{clips[1].audio()}, func(int, []events.Occurrence, error) error { return nil })
	if !researcher.IsClipFault(err) {
		t.Errorf("an episode whose object changed: %v, want its fault", err)
	}
}

// TestAClipBeyondTheIndexBoundFailsAlone: a clip longer than the index
// takes (but within what is decoded of a clip) is that clip's permanent
// failure; the item's other clips are researched.
func TestAClipBeyondTheIndexBoundFailsAlone(t *testing.T) {
	long := &media{key: "long", b: locatetest.WAV(locatetest.Bed(3, 121, 8000), 8000)}
	j := locatetest.Jingle(4, 3, 8000)
	ep := locatetest.Bed(5, 30, 8000)
	locatetest.Insert(ep, j, 8000*10, 0.5)
	got := locateItem(t, locate.NewLocator(), &media{key: "ep", b: locatetest.WAV(ep, 8000)}, long, &media{key: "j", b: locatetest.WAV(j, 8000)})
	var le *audio.LimitError
	if !errors.As(got.fail[0], &le) || !researcher.IsClipFault(got.fail[0]) {
		t.Errorf("the long clip: %v, want its own limit error", got.fail[0])
	}
	if len(got.occ[1]) != 1 {
		t.Errorf("the other clip: %+v, want found once", got.occ[1])
	}
}

// TestAudioWithoutADeclaredDigestIsAnalysedOnce: records that declare no
// sha256 (the schema allows it) cost no more than records that do: the
// store's name of the bytes (researcher.Audio.Digest) keys their prints,
// so the episode and each clip are decoded once; bytes replaced under the
// same key get a new name and are analysed again, and found as they now
// are; bytes replaced while they are analysed keep no print under the old
// name; and audio nothing names is analysed every time.
func TestAudioWithoutADeclaredDigestIsAnalysedOnce(t *testing.T) {
	const rate = 8000
	jingle := locatetest.Jingle(60, 3, rate)
	at := func(seconds int) []byte {
		ep := locatetest.Bed(61, 40, rate)
		locatetest.Insert(ep, jingle, seconds*rate, 0.5)
		return locatetest.WAV(ep, rate)
	}
	var generation atomic.Int32 // the store's name of the episode's bytes
	episode := &media{key: "ep", b: at(10)}
	clip := &media{key: "jingle", b: locatetest.WAV(jingle, rate)}
	undeclared := func(m *media, name func() string) researcher.Audio {
		a := m.audio()
		a.Ref.Media.SHA256 = ""
		a.Digest = func(context.Context) (string, error) { return name(), nil }
		return a
	}
	named := func(what string) func() string {
		return func() string {
			h := sha256.Sum256(fmt.Appendf(nil, "%s %d", what, generation.Load()))
			return hex.EncodeToString(h[:])
		}
	}
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := locate.NewLocator()
	l.Artifacts = newArtifacts(t, store, t.TempDir())
	run := func(name string, ep researcher.Audio, wantAt float64, opens int32) {
		t.Helper()
		var occ []events.Occurrence
		err := l.Locate(context.Background(), ep, []researcher.Audio{undeclared(clip, named("clip"))}, func(_ int, o []events.Occurrence, failure error) error {
			occ = o
			return failure
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(occ) != 1 || math.Abs(float64(occ[0].OffsetMS)/1000-wantAt) > 0.1 {
			t.Errorf("%s: found %+v, want once at %.0f s", name, occ, wantAt)
		}
		if n := episode.opens.Swap(0); n != opens {
			t.Errorf("%s: the episode was opened %d times, want %d", name, n, opens)
		}
	}
	run("first item", undeclared(episode, named("ep")), 10, 1)
	run("second item", undeclared(episode, named("ep")), 10, 0)
	if n := clip.opens.Load(); n != 1 {
		t.Errorf("the clip was opened %d times, want once", n)
	}

	// Other bytes under the same key: a new name, analysed again.
	episode.b = at(25)
	generation.Add(1)
	run("replaced", undeclared(episode, named("ep")), 25, 1)
	run("replaced, again", undeclared(episode, named("ep")), 25, 0)

	// Replaced while analysed: the name changes between the start and the
	// end of the analysis, and nothing is kept under either.
	episode.b = at(30)
	calls := 0
	racing := undeclared(episode, func() string {
		calls++
		if calls > 1 {
			generation.Store(7)
		}
		return named("ep")()
	})
	generation.Store(6)
	run("replaced while analysed", racing, 30, 1)
	generation.Store(6)
	run("not kept under the first name", undeclared(episode, named("ep")), 30, 1)

	// Nothing names the bytes: analysed every time.
	nameless := undeclared(episode, func() string { return "" })
	run("nameless", nameless, 30, 1)
	run("nameless, again", nameless, 30, 1)
}
