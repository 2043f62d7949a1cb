// Package locatecmd is `archivist locate`: find every occurrence of each
// clip in a directory inside an episode's audio, with the researcher's own
// locator, and print them as a table or JSON.
package locatecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// Extensions are the audio files taken from the clips directory.
var Extensions = []string{".wav", ".flac", ".mp3", ".ogg", ".oga"}

// Result is one occurrence of a clip.
type Result struct {
	// Clip is the clip's file name without its extension.
	Clip string `json:"clip"`
	events.Occurrence
}

func fileAudio(path string) researcher.Audio {
	return researcher.Audio{Ref: events.AudioRef{Key: path}, Open: func(context.Context) (io.ReadCloser, error) { return os.Open(path) }}
}

// Missed is a clip found nowhere in the episode, and why: its best
// candidates, each with the stage that refused it (locate.Miss).
type Missed struct {
	// Clip is the clip's file name without its extension.
	Clip       string                 `json:"clip"`
	Candidates []events.MissCandidate `json:"candidates"`
}

// An Option sets the locator up.
type Option func(*locate.Locator) error

// SpeedRange finds clips played from 1 − r to 1 + r of their speed, as
// RESEARCHER_SPEED_RANGE has the researchers do.
func SpeedRange(r float64) Option { return func(l *locate.Locator) error { return l.SpanSpeeds(r) } }

// Locate finds the clips of dir (every file with one of Extensions) in the
// episode file. Results are by clip name, then offset.
func Locate(ctx context.Context, episode, dir string, opts ...Option) ([]Result, error) {
	out, _, err := locateIn(ctx, episode, dir, false, opts)
	return out, err
}

// Explain is Locate, with the misses explained: each clip found nowhere,
// by name, with its best refused candidates.
func Explain(ctx context.Context, episode, dir string, opts ...Option) ([]Result, []Missed, error) {
	return locateIn(ctx, episode, dir, true, opts)
}

func locateIn(ctx context.Context, episode, dir string, explain bool, opts []Option) ([]Result, []Missed, error) {
	l := locate.NewLocator()
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, nil, err
		}
	}
	if _, err := os.Stat(episode); err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var clips []researcher.Audio
	var names []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || !slices.Contains(Extensions, ext) {
			continue
		}
		clips = append(clips, fileAudio(filepath.Join(dir, e.Name())))
		names = append(names, strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())))
	}
	if len(clips) == 0 {
		return nil, nil, fmt.Errorf("no clips (%s) in %s", strings.Join(Extensions, " "), dir)
	}
	var out []Result
	var misses []Missed
	var failed []error
	found := func(i int, occ []events.Occurrence, miss *events.Miss, failure error) error {
		if miss != nil {
			misses = append(misses, Missed{Clip: names[i], Candidates: miss.Candidates})
		}
		if failure != nil {
			failed = append(failed, failure)
		}
		for _, o := range occ {
			out = append(out, Result{Clip: names[i], Occurrence: o})
		}
		return nil
	}
	if explain {
		err = l.LocateExplained(ctx, fileAudio(episode), clips, found)
	} else {
		err = l.Locate(ctx, fileAudio(episode), clips, func(i int, occ []events.Occurrence, failure error) error { return found(i, occ, nil, failure) })
	}
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(misses, func(a, b Missed) int { return strings.Compare(a.Clip, b.Clip) })
	slices.SortFunc(out, func(a, b Result) int {
		if c := strings.Compare(a.Clip, b.Clip); c != 0 {
			return c
		}
		return int(a.OffsetMS - b.OffsetMS)
	})
	if len(failed) > 0 {
		return out, misses, fmt.Errorf("%d of %d clips could not be read: %w", len(failed), len(clips), errors.Join(failed...))
	}
	return out, misses, nil
}

// PrintMisses writes why each clip missed was not found: its best
// candidates, one a line.
func PrintMisses(w io.Writer, ms []Missed) error {
	if len(ms) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nNOT FOUND\tBEST AT\tVOTES\tNEEDED\tCONFIDENCE\tWAVEFORM\tSNR\tSPEED\tREFUSED BY")
	for _, m := range ms {
		for _, r := range m.Candidates {
			snr := "-"
			if r.SNRDB != nil {
				snr = fmt.Sprintf("%.0f dB", *r.SNRDB)
			}
			fmt.Fprintf(tw, "%s\t%.3f\t%d/%d\t%d\t%.3f\t%.2f\t%s\t%.2f\t%s: %s\n", m.Clip, float64(r.OffsetMS)/1000, r.Votes, r.Hashes, r.Needed,
				r.Confidence, r.Waveform, snr, r.Speed, r.Stage, locate.Stages[r.Stage])
		}
	}
	return tw.Flush()
}

// Print writes the results as a table.
func Print(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIP\tOFFSET\tSECONDS\tDURATION\tCONFIDENCE\tSPEED\tTEMPO")
	for _, r := range rs {
		ms := r.OffsetMS
		fmt.Fprintf(tw, "%s\t%d:%02d:%02d.%03d\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\n", r.Clip, ms/3600000, ms/60000%60, ms/1000%60, ms%1000,
			float64(ms)/1000, float64(r.DurationMS)/1000, r.Confidence, r.Speed, or1(r.Tempo))
	}
	if len(rs) == 0 {
		fmt.Fprintln(tw, "(no occurrences)")
	}
	return tw.Flush()
}

// or1 is a factor the locator did not say (0) as 1.
func or1(f float64) float64 {
	if f == 0 {
		return 1
	}
	return f
}
