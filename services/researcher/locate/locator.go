package locate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// Locator is the researcher's ClipLocator: it fingerprints the clips,
// streams the episode through them, and reports each clip's occurrences.
type Locator struct {
	// Params are the analysis settings (DefaultParams).
	Params Params
}

// NewLocator returns a Locator with the default settings.
func NewLocator() *Locator { return &Locator{Params: DefaultParams} }

var _ researcher.ClipLocator = (*Locator)(nil)

// Locate implements researcher.ClipLocator. Clips are decoded whole (they
// are seconds long); the episode streams in blocks, so memory does not grow
// with its length. Every clip's result is reported once the episode has
// been read to its end (an occurrence can be anywhere until then).
func (l *Locator) Locate(ctx context.Context, episode researcher.Audio, clips []researcher.Audio, found func(clip int, occ []events.Occurrence) error) error {
	cs := make([]Clip, len(clips))
	for i, c := range clips {
		samples, err := l.readClip(ctx, c)
		if err != nil {
			return fmt.Errorf("clip %s: %w", c.Ref.Key, err)
		}
		cs[i] = Clip{Name: c.Ref.Key, Samples: samples}
	}
	x, err := NewIndex(l.Params, cs)
	if err != nil {
		return err
	}
	occ, err := l.stream(ctx, episode, x)
	if err != nil {
		return fmt.Errorf("episode %s: %w", episode.Ref.Key, err)
	}
	byClip := make([][]events.Occurrence, len(clips))
	for _, o := range occ {
		byClip[o.Clip] = append(byClip[o.Clip], events.Occurrence{
			OffsetMS:   int64(math.Round(o.Offset * 1000)),
			DurationMS: int64(math.Round(o.Duration * 1000)),
			Confidence: o.Confidence,
		})
	}
	for i := range clips {
		if err := found(i, byClip[i]); err != nil {
			return err
		}
	}
	return nil
}

// open decodes a's audio at the analysis rate; close the returned closer.
func (l *Locator) open(ctx context.Context, a researcher.Audio) (audio.Stream, io.Closer, error) {
	rc, err := a.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := audio.Decode(rc, l.Params.Rate)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return s, rc, nil
}

func (l *Locator) readClip(ctx context.Context, a researcher.Audio) ([]float32, error) {
	s, c, err := l.open(ctx, a)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	x, err := audio.ReadAll(s)
	if err != nil {
		return nil, err
	}
	if len(x) == 0 {
		return nil, errors.New("no audio in the clip")
	}
	return x, nil
}

func (l *Locator) stream(ctx context.Context, a researcher.Audio, x *Index) ([]Occurrence, error) {
	s, c, err := l.open(ctx, a)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m := NewMatcher(x, nil)
	buf := make([]float32, 1<<16)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := s.Read(buf)
		m.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return m.Finish(), nil
}
