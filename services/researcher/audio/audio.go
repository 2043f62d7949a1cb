// Package audio decodes WAV, FLAC, MP3 and Ogg Vorbis into a stream of mono
// float32 samples and resamples it with an anti-alias filter: what the clip
// locator analyses. Every decoder streams; memory does not grow with the
// length of the audio.
package audio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Stream is decoded mono audio.
type Stream interface {
	// SampleRate is in hertz.
	SampleRate() int
	// Read fills buf with samples in [-1, 1] and returns how many it wrote;
	// io.EOF after the last one.
	Read(buf []float32) (int, error)
}

// Format names an audio container.
type Format string

// The formats Open reads.
const (
	WAV    Format = "wav"
	FLAC   Format = "flac"
	MP3    Format = "mp3"
	Vorbis Format = "ogg-vorbis"
)

// ErrUnknownFormat is returned for audio that is none of the formats.
var ErrUnknownFormat = errors.New("audio: not WAV, FLAC, MP3 or Ogg Vorbis")

// Sniff tells the format from the first bytes of a file.
func Sniff(head []byte) (Format, error) {
	switch {
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WAVE":
		return WAV, nil
	case bytes.HasPrefix(head, []byte("fLaC")):
		return FLAC, nil
	case bytes.HasPrefix(head, []byte("OggS")):
		return Vorbis, nil
	case bytes.HasPrefix(head, []byte("ID3")):
		return MP3, nil
	case len(head) >= 2 && head[0] == 0xFF && head[1]&0xE0 == 0xE0:
		return MP3, nil
	}
	return "", ErrUnknownFormat
}

// Open decodes r, telling its format from its first bytes, and downmixes it
// to mono, within DefaultLimits.
func Open(r io.Reader) (Stream, error) { return OpenLimited(r, DefaultLimits) }

// OpenLimited is Open within lim: a header breaking lim fails here with a
// *LimitError before anything is decoded, and a stream longer than
// lim.MaxDuration fails when it gets there. A decoder's panic on a corrupt
// file is returned as an error.
func OpenLimited(r io.Reader, lim Limits) (s Stream, err error) {
	src := &source{r: r}
	br := bufio.NewReaderSize(src, 64<<10)
	head, _ := br.Peek(12)
	if src.err != nil {
		// The reader failed (a connection to the store broken, say):
		// that is no verdict on the format, and may pass.
		return nil, fmt.Errorf("audio: reading the header: %w", src.err)
	}
	f, err := Sniff(head)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("audio: %s: %w: decoder failed: %v", f, ErrCorrupt, p)
		}
	}()
	var channels int
	switch f {
	case WAV:
		var w *wavStream
		w, err = openWAV(br)
		s = w
		if err == nil {
			channels = w.channels
		}
	case FLAC:
		var fs *flacStream
		fs, err = openFLAC(br)
		s = fs
		if err == nil {
			channels = fs.channels
		}
	case MP3:
		s, err = openMP3(br)
		channels = 2
	case Vorbis:
		var v *vorbisStream
		v, err = openVorbis(br)
		s = v
		if err == nil {
			channels = v.r.Channels()
		}
	}
	if err == nil {
		err = lim.check(channels, s.SampleRate())
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the file ended inside its header
		}
		return nil, fmt.Errorf("audio: %s: %w", f, src.classify(err))
	}
	s = guarded{Stream: s, src: src}
	if lim.MaxDuration > 0 {
		max := int64(lim.MaxDuration.Seconds() * float64(s.SampleRate()))
		s = &limited{Stream: s, left: max, max: max, d: lim.MaxDuration}
	}
	return s, nil
}

// Samples is a Stream of samples in memory at rate (read once).
func Samples(x []float32, rate int) Stream { return &memory{x: x, rate: rate} }

type memory struct {
	x    []float32
	rate int
}

func (m *memory) SampleRate() int { return m.rate }

func (m *memory) Read(buf []float32) (int, error) {
	if len(m.x) == 0 {
		return 0, io.EOF
	}
	n := copy(buf, m.x)
	m.x = m.x[n:]
	return n, nil
}

// ReadAll reads the whole stream (for short clips).
func ReadAll(s Stream) ([]float32, error) {
	var out []float32
	buf := make([]float32, 16<<10)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// Decode opens r and resamples it to rate: Open followed by Resample.
func Decode(r io.Reader, rate int) (Stream, error) { return DecodeLimited(r, rate, DefaultLimits) }

// DecodeLimited is OpenLimited followed by Resample.
func DecodeLimited(r io.Reader, rate int, lim Limits) (Stream, error) {
	s, err := OpenLimited(r, lim)
	if err != nil {
		return nil, err
	}
	return Resample(s, rate), nil
}

// interleaved downmixes interleaved frames of ch channels into mono.
func downmix(dst []float32, src []float32, ch int) int {
	if ch == 1 {
		return copy(dst, src)
	}
	n := len(src) / ch
	inv := 1 / float32(ch)
	for i := range n {
		var sum float32
		for c := range ch {
			sum += src[i*ch+c]
		}
		dst[i] = sum * inv
	}
	return n
}
