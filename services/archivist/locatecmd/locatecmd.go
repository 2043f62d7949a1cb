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

// Locate finds the clips of dir (every file with one of Extensions) in the
// episode file. Results are by clip name, then offset.
func Locate(ctx context.Context, episode, dir string) ([]Result, error) {
	if _, err := os.Stat(episode); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("no clips (%s) in %s", strings.Join(Extensions, " "), dir)
	}
	var out []Result
	var failed []error
	err = locate.NewLocator().Locate(ctx, fileAudio(episode), clips, func(i int, occ []events.Occurrence, failure error) error {
		if failure != nil {
			failed = append(failed, failure)
		}
		for _, o := range occ {
			out = append(out, Result{Clip: names[i], Occurrence: o})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Result) int {
		if c := strings.Compare(a.Clip, b.Clip); c != 0 {
			return c
		}
		return int(a.OffsetMS - b.OffsetMS)
	})
	if len(failed) > 0 {
		return out, fmt.Errorf("%d of %d clips could not be read: %w", len(failed), len(clips), errors.Join(failed...))
	}
	return out, nil
}

// Print writes the results as a table.
func Print(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIP\tOFFSET\tSECONDS\tDURATION\tCONFIDENCE")
	for _, r := range rs {
		ms := r.OffsetMS
		fmt.Fprintf(tw, "%s\t%d:%02d:%02d.%03d\t%.3f\t%.3f\t%.3f\n", r.Clip, ms/3600000, ms/60000%60, ms/1000%60, ms%1000,
			float64(ms)/1000, float64(r.DurationMS)/1000, r.Confidence)
	}
	if len(rs) == 0 {
		fmt.Fprintln(tw, "(no occurrences)")
	}
	return tw.Flush()
}
