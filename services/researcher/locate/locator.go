package locate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/researcher/artifact"
	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// Locator is the researcher's ClipLocator: it fingerprints the clips,
// streams the episode through them, and reports each clip's occurrences.
// With Artifacts, each episode and each clip is analysed once: their
// prints are kept, and a work item of an episode whose print is kept
// replays it (Matcher.Replay) instead of decoding the episode again.
type Locator struct {
	// Params are the analysis settings (DefaultParams).
	Params Params
	// MaxClip and MaxEpisode bound how much audio of a clip (decoded whole)
	// and of an episode (streamed) is decoded; longer audio fails with an
	// *audio.LimitError naming the duration bound.
	MaxClip, MaxEpisode time.Duration
	// Artifacts, when set, keeps the prints of the audio whose bytes are
	// named (researcher.Audio.Digest, else the sha256 the catalog
	// declares); audio nothing names is analysed every time.
	Artifacts *artifact.Cache
	// Log receives warnings about artifacts (slog.Default if nil).
	Log *slog.Logger
}

// ExplainCandidates is how many refused candidates explain a miss.
const ExplainCandidates = 3

// matcher is a Matcher of x, explaining its misses when explain.
func (l *Locator) matcher(x *Index, explain bool) *Matcher {
	m := NewMatcher(x)
	if explain {
		m.Explain = ExplainCandidates
	}
	return m
}

// finish ends m's episode: its occurrences and misses.
func finish(m *Matcher) ([]Occurrence, []Miss) {
	occ := m.Finish()
	return occ, m.Misses()
}

// The default duration bounds: clips are seconds long, episodes hours.
const (
	DefaultMaxClip    = 5 * time.Minute
	DefaultMaxEpisode = 12 * time.Hour
)

// NewLocator returns a Locator with the default settings.
func NewLocator() *Locator {
	return &Locator{Params: DefaultParams, MaxClip: DefaultMaxClip, MaxEpisode: DefaultMaxEpisode}
}

var (
	_ researcher.ClipLocator   = (*Locator)(nil)
	_ researcher.MissExplainer = (*Locator)(nil)
	_ researcher.SpeedSpanner  = (*Locator)(nil)
)

// SpanSpeeds implements researcher.SpeedSpanner: clips are indexed at
// speeds every 2 % from 1 − r to 1 + r (Params.Spanning).
func (l *Locator) SpanSpeeds(r float64) error {
	p, err := l.Params.Spanning(r)
	if err != nil {
		return err
	}
	l.Params = p
	return nil
}

// Locate implements researcher.ClipLocator. Clips are decoded whole (they
// are seconds long); the episode streams in blocks, so memory does not grow
// with its length. A clip whose audio fails (missing, undecodable, beyond a
// bound) is reported at once with its failure and left out; every other
// clip's result is reported once the episode has been read to its end (an
// occurrence can be anywhere until then).
func (l *Locator) Locate(ctx context.Context, episode researcher.Audio, clips []researcher.Audio, found func(clip int, occ []events.Occurrence, failure error) error) error {
	return l.locate(ctx, episode, clips, false, func(clip int, occ []events.Occurrence, _ *events.Miss, failure error) error {
		return found(clip, occ, failure)
	})
}

// LocateExplained implements researcher.MissExplainer: Locate, with a
// clip found nowhere told why (its best candidates, each with the stage
// that refused it, Miss).
func (l *Locator) LocateExplained(ctx context.Context, episode researcher.Audio, clips []researcher.Audio, found func(clip int, occ []events.Occurrence, miss *events.Miss, failure error) error) error {
	return l.locate(ctx, episode, clips, true, found)
}

func (l *Locator) locate(ctx context.Context, episode researcher.Audio, clips []researcher.Audio, explain bool, found func(clip int, occ []events.Occurrence, miss *events.Miss, failure error) error) error {
	var prints []*ClipPrint
	var ok []int // clip indexes of prints
	for i, c := range clips {
		cp, err := l.clipPrint(ctx, c)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !researcher.IsClipFault(err) {
			return fmt.Errorf("clip %s: %w", c.Ref.Key, err) // the whole item is retried
		}
		if err != nil {
			if ferr := found(i, nil, nil, fmt.Errorf("clip %s: %w", c.Ref.Key, err)); ferr != nil {
				return ferr
			}
			continue
		}
		prints = append(prints, cp)
		ok = append(ok, i)
	}
	if len(prints) == 0 {
		return nil
	}
	x, err := NewIndexOfPrints(l.Params, prints)
	if err != nil {
		return err
	}
	occ, misses, err := l.search(ctx, episode, x, explain)
	if err != nil {
		return fmt.Errorf("episode %s: %w", episode.Ref.Key, err)
	}
	missed := make([]*events.Miss, len(prints))
	for _, miss := range misses {
		missed[miss.Clip] = miss.Event()
	}
	byClip := make([][]events.Occurrence, len(prints))
	for _, o := range occ {
		byClip[o.Clip] = append(byClip[o.Clip], events.Occurrence{
			OffsetMS:   int64(math.Round(o.Offset * 1000)),
			DurationMS: int64(math.Round(o.Duration * 1000)),
			Confidence: o.Confidence,
			Speed:      o.Speed,
			Tempo:      o.Tempo,
		})
	}
	for j, i := range ok {
		if err := found(i, byClip[j], missed[j], nil); err != nil {
			return err
		}
	}
	return nil
}

// open decodes a's audio, at most max of it; close the returned closer.
func (l *Locator) open(ctx context.Context, a researcher.Audio, max time.Duration) (audio.Stream, io.Closer, error) {
	rc, err := a.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	lim := audio.DefaultLimits
	lim.MaxDuration = max
	s, err := audio.OpenLimited(rc, lim)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return s, rc, nil
}

// readClip decodes a clip whole, at the analysis rate and its high band
// (ReadClip).
func (l *Locator) readClip(ctx context.Context, a researcher.Audio) (Clip, error) {
	s, c, err := l.open(ctx, a, l.MaxClip)
	if err != nil {
		return Clip{}, err
	}
	defer c.Close()
	clip, err := ReadClip(a.Ref.Key, s, l.Params)
	if err != nil {
		return Clip{}, err
	}
	if len(clip.Samples) == 0 {
		return Clip{}, fmt.Errorf("%w: no audio in the clip", audio.ErrCorrupt)
	}
	return clip, nil
}

// stream reads the episode through the clips' index (Matcher.Stream),
// recording its prints to rec (nil: none), and returns what it found, its
// misses (when explain) and the episode's sample rate.
func (l *Locator) stream(ctx context.Context, a researcher.Audio, x *Index, explain bool, rec *recorder) ([]Occurrence, []Miss, int, error) {
	s, c, err := l.open(ctx, a, l.MaxEpisode)
	if err != nil {
		return nil, nil, 0, err
	}
	defer c.Close()
	m := l.matcher(x, explain)
	if rec != nil {
		m.Record(rec.low.writer(), rec.high.writer())
	}
	if err := m.Stream(ctx, s); err != nil {
		return nil, nil, 0, err
	}
	occ, misses := finish(m)
	return occ, misses, s.SampleRate(), nil
}
