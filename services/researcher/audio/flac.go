package audio

import (
	"fmt"
	"io"

	"github.com/mewkiz/flac"
)

type flacStream struct {
	s       *flac.Stream
	pending []float32
	scale   float32
}

func openFLAC(r io.Reader) (*flacStream, error) {
	s, err := flac.New(r)
	if err != nil {
		return nil, err
	}
	if b := s.Info.BitsPerSample; b < 4 || b > 32 {
		return nil, fmt.Errorf("%d bits per sample (4 to 32)", b)
	}
	return &flacStream{s: s, scale: 1 / float32(int64(1)<<(s.Info.BitsPerSample-1))}, nil
}

func (f *flacStream) SampleRate() int { return int(f.s.Info.SampleRate) }

func (f *flacStream) Read(buf []float32) (int, error) {
	for len(f.pending) == 0 {
		frame, err := f.s.ParseNext()
		if err != nil {
			return 0, err // io.EOF at the end
		}
		n := len(frame.Subframes[0].Samples)
		if cap(f.pending) < n {
			f.pending = make([]float32, n)
		}
		f.pending = f.pending[:n]
		ch := len(frame.Subframes)
		scale := f.scale / float32(ch)
		for i := range n {
			var sum int64
			for c := range ch {
				sum += int64(frame.Subframes[c].Samples[i])
			}
			f.pending[i] = float32(sum) * scale
		}
	}
	n := copy(buf, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}
