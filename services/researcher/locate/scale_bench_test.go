package locate_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/researcher/artifact"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// fileAudio is a file as a piece of audio whose sha256 is declared as
// sha (a stand-in for the catalog's: the benchmark's files are its own).
func fileAudio(key, path, sha string) researcher.Audio {
	return researcher.Audio{Ref: events.AudioRef{Key: key, Media: events.Media{Key: path, SHA256: sha}},
		Open: func(context.Context) (io.ReadCloser, error) { return os.Open(path) }}
}

// researchItems researches an episode against clips the way the pwa
// leases it: items of at most perItem clips, one after another, and
// returns the occurrences found.
func researchItems(b *testing.B, l *locate.Locator, ep researcher.Audio, clips []researcher.Audio, perItem int) int {
	return research(b, l, ep, clips, perItem, false)
}

// research is researchItems, asking why each clip missed was not found
// when explain (as the researcher does).
func research(b *testing.B, l *locate.Locator, ep researcher.Audio, clips []researcher.Audio, perItem int, explain bool) int {
	found := 0
	for i := 0; i < len(clips); i += perItem {
		item := clips[i:min(i+perItem, len(clips))]
		tell := func(_ int, occ []events.Occurrence, _ *events.Miss, failure error) error {
			if failure != nil {
				return failure
			}
			found += len(occ)
			return nil
		}
		var err error
		if explain {
			err = l.LocateExplained(context.Background(), ep, item, tell)
		} else {
			err = l.Locate(context.Background(), ep, item, func(i int, occ []events.Occurrence, failure error) error { return tell(i, occ, nil, failure) })
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return found
}

// BenchmarkResearchAtScale is the research pipeline's cost per
// (episode-hour × clip) pair with 10, 100 and 1,000 active clips (the
// ARCHIVIST_RESEARCH_CLIPS list) over a synthetic episode of
// ARCHIVIST_RESEARCH_MINUTES (60) minutes, 44.1 kHz WAV (the cheapest to
// decode: the ratio to today is the least it can be), researched as the
// pwa leases it: items of RESEARCH_MAX_CLIPS (8), clips indexed at the
// speeds of ARCHIVIST_RESEARCH_SPEED_RANGE where set (as
// RESEARCHER_SPEED_RANGE; default 0.02). Side by side in one run:
//
//   - today: every item decodes and fingerprints the episode and its
//     clips (a Locator keeping nothing). Its cost per item does not
//     depend on the number of clips; it is measured on two items.
//   - kept, new clips: a Locator keeping artifacts, the episode and the
//     clips new to it: the first item analyses the episode, the others
//     replay its print; each clip is analysed once.
//   - kept, known clips: the same with every clip's print already kept
//     (from earlier episodes): the steady state of an archive, where a
//     clip is researched in tens of thousands of episodes.
//
// It reports pairs per core-second (CPU time of the process, every core,
// the background uploads of prints included), the first item's own cost
// against today's item and its print's upload apart, and the peak
// resident set.
//
//	go test -run '^$' -bench ResearchAtScale -benchtime 1x -timeout 60m ./locate/
func BenchmarkResearchAtScale(b *testing.B) {
	minutes, perItem := 60, 8
	if v, err := strconv.Atoi(os.Getenv("ARCHIVIST_RESEARCH_MINUTES")); err == nil && v > 0 {
		minutes = v
	}
	sizes := []int{10, 100, 1000}
	if v := os.Getenv("ARCHIVIST_RESEARCH_CLIPS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("ARCHIVIST_RESEARCH_CLIPS: %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	// Every locator indexes clips at the speeds of
	// ARCHIVIST_RESEARCH_SPEED_RANGE (RESEARCHER_SPEED_RANGE) where set.
	newLocator := func() *locate.Locator {
		l := locate.NewLocator()
		if v := os.Getenv("ARCHIVIST_RESEARCH_SPEED_RANGE"); v != "" {
			r, err := strconv.ParseFloat(v, 64)
			if err == nil {
				err = l.SpanSpeeds(r)
			}
			if err != nil {
				b.Fatalf("ARCHIVIST_RESEARCH_SPEED_RANGE: %v", err)
			}
		}
		return l
	}
	top := 0
	for _, n := range sizes {
		top = max(top, n)
	}
	dir := b.TempDir()
	// Clips of 2 to 8 s at 22.05 kHz (a high band to search), as files;
	// every tenth is played in the episode.
	var clips []researcher.Audio
	var played [][]float32
	for i := range top {
		x := locatetest.Jingle(uint64(7000+i), 2+float64(i%13)/2, 22050)
		path := filepath.Join(dir, fmt.Sprintf("clip%04d.wav", i))
		if err := os.WriteFile(path, locatetest.WAV(x, 22050), 0o644); err != nil {
			b.Fatal(err)
		}
		clips = append(clips, fileAudio(fmt.Sprint("clip:", i), path, fmt.Sprintf("%064x", i+1)))
		if i%10 == 0 && len(played) < 60 {
			played = append(played, locatetest.Jingle(uint64(7000+i), 2+float64(i%13)/2, 44100))
		}
	}
	epPath := filepath.Join(dir, "episode.wav")
	writeLongEpisode(b, epPath, minutes, played)
	episode := fileAudio("ep:1", epPath, strings.Repeat("e", 64))
	hours := float64(minutes) / 60
	store, err := blob.NewLocal(filepath.Join(dir, "store"))
	if err != nil {
		b.Fatal(err)
	}
	keeping := func(name string) *locate.Locator {
		c, err := artifact.New(artifact.Options{Dir: filepath.Join(dir, name), MaxBytes: 64 << 30, Store: store, Key: []byte("a test key of the researchers")})
		if err != nil {
			b.Fatal(err)
		}
		l := newLocator()
		l.Artifacts = c
		return l
	}
	// Today: two items.
	runtime.GC()
	t0 := testenv.CPUTime()
	researchItems(b, newLocator(), episode, clips[:min(2*perItem, top)], perItem)
	todayItem := (testenv.CPUTime() - t0) / time.Duration((min(2*perItem, top)+perItem-1)/perItem)
	todayRate := float64(perItem) * hours / todayItem.Seconds()
	fmt.Printf("\n%d-minute episode (44.1 kHz WAV), items of %d clips; pairs are (episode-hour × clip) per core-second\n", minutes, perItem)
	fmt.Printf("today: %.2f core-s an item, %.2f pairs per core-second at any number of clips\n\n", todayItem.Seconds(), todayRate)
	fmt.Println("| active clips | items | kept, new clips: core-s | pairs/core-s | × today | kept, known clips: core-s | pairs/core-s | × today | first item: core-s | × today's item | its upload: core-s | peak RSS |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	// The first item of an episode against today's item, alternately
	// (the machine's drift falls on both), each time new audio to both.
	b.Run("first-item", func(b *testing.B) {
		var ratios []float64
		for r := range 5 {
			cs := make([]researcher.Audio, perItem)
			for i := range cs {
				cs[i] = fileAudio(fmt.Sprint("clip:", i), clips[i].Ref.Media.Key, fmt.Sprintf("%054xff%08x", r, i))
			}
			runtime.GC()
			t0 := testenv.CPUTime()
			pprof.Do(context.Background(), pprof.Labels("item", "today"), func(context.Context) {
				researchItems(b, newLocator(), episode, cs, perItem)
			})
			today := testenv.CPUTime() - t0
			l := keeping(fmt.Sprint("first", r))
			runtime.GC()
			t0 = testenv.CPUTime()
			pprof.Do(context.Background(), pprof.Labels("item", "first"), func(context.Context) {
				researchItems(b, l, fileAudio("ep:1", epPath, fmt.Sprintf("%062xff", r)), cs, perItem)
			})
			first := testenv.CPUTime() - t0
			if err := l.Artifacts.Wait(context.Background()); err != nil {
				b.Fatal(err)
			}
			ratios = append(ratios, first.Seconds()/today.Seconds())
		}
		slices.Sort(ratios)
		fmt.Printf("first item of an episode against today's item, five alternate rounds: median %.3f× (%.3f to %.3f)\n\n", ratios[2], ratios[0], ratios[4])
		b.ReportMetric(ratios[2], "first-item-x-today-median")
	})
	for k, n := range sizes {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			for range b.N {
				// New clips: the episode and clips new to this researcher's
				// directory and to the store (their sha256s are new).
				ep := fileAudio("ep:1", epPath, fmt.Sprintf("%063x%d", k, 1))
				cs := make([]researcher.Audio, n)
				for i := range n {
					cs[i] = fileAudio(fmt.Sprint("clip:", i), clips[i].Ref.Media.Key, fmt.Sprintf("%056x%08x", k+1, i))
				}
				l := keeping(fmt.Sprint("new", k))
				runtime.GC()
				testenv.ResetPeakRSS()
				t0 := testenv.CPUTime()
				researchItems(b, l, ep, cs[:min(perItem, n)], perItem)
				first := testenv.CPUTime() - t0
				// Its print goes to the store in the background: counted
				// apart (once per episode), and in the totals.
				if err := l.Artifacts.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
				upload := testenv.CPUTime() - t0 - first
				researchItems(b, l, ep, cs[min(perItem, n):], perItem)
				if err := l.Artifacts.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
				cold := testenv.CPUTime() - t0
				// Known clips: the same clips, kept; another episode (its
				// own sha256), new to the store.
				ep2 := fileAudio("ep:2", epPath, fmt.Sprintf("%063x%d", k, 2))
				runtime.GC()
				t0 = testenv.CPUTime()
				found := researchItems(b, l, ep2, cs, perItem)
				if err := l.Artifacts.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
				warm := testenv.CPUTime() - t0
				peak := testenv.PeakRSS(b)
				items := (n + perItem - 1) / perItem
				pairs := float64(n) * hours
				fmt.Printf("| %d | %d | %.1f | %.1f | %.1f× | %.1f | %.1f | %.1f× | %.2f | %.2f× | %.2f | %d MiB |\n", n, items,
					cold.Seconds(), pairs/cold.Seconds(), pairs/cold.Seconds()/todayRate,
					warm.Seconds(), pairs/warm.Seconds(), pairs/warm.Seconds()/todayRate,
					first.Seconds(), first.Seconds()/todayItem.Seconds(), upload.Seconds(), peak>>20)
				if found == 0 && n >= 10 {
					b.Errorf("%d clips: nothing found, though a clip in ten plays", n)
				}
				b.ReportMetric(todayRate, "today-pairs/core-s")
				b.ReportMetric(pairs/cold.Seconds(), "new-clips-pairs/core-s")
				b.ReportMetric(pairs/warm.Seconds(), "known-clips-pairs/core-s")
				b.ReportMetric(pairs/warm.Seconds()/todayRate, "known-clips-x-today")
				b.ReportMetric(first.Seconds()/todayItem.Seconds(), "first-item-x-today")
				b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
				// What explaining the misses costs (the researcher asks for
				// it): the known clips again, plain and explained, in five
				// alternate rounds.
				var ratios []float64
				for range 5 {
					var took [2]time.Duration
					for j, explain := range []bool{false, true} {
						runtime.GC()
						t0 := testenv.CPUTime()
						research(b, l, ep2, cs, perItem, explain)
						took[j] = testenv.CPUTime() - t0
					}
					ratios = append(ratios, took[1].Seconds()/took[0].Seconds())
				}
				slices.Sort(ratios)
				fmt.Printf("%d clips: explaining the misses, five alternate rounds of the known clips: median %.3f× (%.3f to %.3f)\n", n, ratios[2], ratios[0], ratios[4])
				b.ReportMetric(ratios[2], "explained-x-plain-median")
			}
		})
	}
}
