package audio

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Limits bounds the audio a decoder accepts, checked from the headers
// before any sample is decoded, and while decoding for the duration. A
// header declaring 65,535 channels or a sample rate near 4 GHz would
// otherwise size buffers and resampling filters from it.
type Limits struct {
	// MaxChannels is the most channels (a 7.1 file has 8).
	MaxChannels int
	// MinRate and MaxRate bound the sample rate, in hertz.
	MinRate, MaxRate int
	// MaxDuration bounds how much audio is decoded (0: no bound). A stream
	// longer than this fails with a *LimitError when it gets there.
	MaxDuration time.Duration
}

// DefaultLimits are the header bounds of Open: 1 to 8 channels, 1 kHz to
// 192 kHz, no duration bound (callers set one for what they decode).
var DefaultLimits = Limits{MaxChannels: 8, MinRate: 1000, MaxRate: 192_000}

// maxFmtChunk bounds a WAV fmt chunk (WAVE_FORMAT_EXTENSIBLE is 40 bytes).
const maxFmtChunk = 1024

// LimitError says which bound the audio broke: permanent, the same file
// breaks it again.
type LimitError struct {
	// Bound names the bound ("channels", "sample rate", "duration").
	Bound string
	// Limit and Got say what is allowed and what the audio has.
	Limit, Got string
}

func (e *LimitError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("audio %s exceeds the limit of %s", e.Bound, e.Limit)
	}
	return fmt.Sprintf("audio %s %s is beyond the limit of %s", e.Bound, e.Got, e.Limit)
}

// check validates a decoder's declared layout against lim.
func (lim Limits) check(channels, rate int) error {
	if channels < 1 || lim.MaxChannels > 0 && channels > lim.MaxChannels {
		return &LimitError{Bound: "channels", Limit: fmt.Sprintf("1-%d", lim.MaxChannels), Got: fmt.Sprint(channels)}
	}
	if rate < lim.MinRate || lim.MaxRate > 0 && rate > lim.MaxRate {
		return &LimitError{Bound: "sample rate", Limit: fmt.Sprintf("%d-%d Hz", lim.MinRate, lim.MaxRate), Got: fmt.Sprintf("%d Hz", rate)}
	}
	return nil
}

// limited fails a stream once it passes max samples.
type limited struct {
	Stream
	left, max int64
	d         time.Duration
}

func (l *limited) Read(buf []float32) (int, error) {
	n, err := l.Stream.Read(buf)
	l.left -= int64(n)
	if l.left < 0 {
		return n, &LimitError{Bound: "duration", Limit: l.d.String()}
	}
	return n, err
}

// ErrCorrupt marks audio its decoder rejected: a fault of the file, not of
// reading it, so the same bytes fail again.
var ErrCorrupt = errors.New("corrupt audio")

// IsPermanent reports whether err is a fault of the audio itself (a bound
// broken, an unknown format, a corrupt file) rather than of reading it.
func IsPermanent(err error) bool {
	var le *LimitError
	return errors.As(err, &le) || errors.Is(err, ErrUnknownFormat) || errors.Is(err, ErrCorrupt)
}

// source remembers the first error of the reader under a decoder, so that a
// decoder's error can be told apart: a read error is the source's (perhaps
// passing), anything else is the file's.
type source struct {
	r   io.Reader
	err error
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// classify marks a decoder's error as ErrCorrupt unless the source failed.
func (s *source) classify(err error) error {
	if err == nil || err == io.EOF || s.err != nil || IsPermanent(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// guarded turns a decoder's panic into an error and classifies its errors:
// a decoder library that panics on a corrupt file (jfreymuth/oggvorbis
// v1.0.5 does on an Ogg page without segments, fixed upstream but not
// released) fails that file, not the process.
type guarded struct {
	Stream
	src *source
}

func (g guarded) Read(buf []float32) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("%w: decoder failed: %v", ErrCorrupt, r)
		}
	}()
	n, err = g.Stream.Read(buf)
	return n, g.src.classify(err)
}
