package audio

import (
	"io"

	"github.com/jfreymuth/oggvorbis"
)

type vorbisStream struct {
	r   *oggvorbis.Reader
	raw []float32
}

func openVorbis(r io.Reader) (*vorbisStream, error) {
	vr, err := oggvorbis.NewReader(r)
	if err != nil {
		return nil, err
	}
	return &vorbisStream{r: vr}, nil
}

func (v *vorbisStream) SampleRate() int { return v.r.SampleRate() }

func (v *vorbisStream) Read(buf []float32) (int, error) {
	ch := v.r.Channels()
	if cap(v.raw) < len(buf)*ch {
		v.raw = make([]float32, len(buf)*ch)
	}
	n, err := v.r.Read(v.raw[:len(buf)*ch])
	return downmix(buf, v.raw[:n-n%ch], ch), err
}
