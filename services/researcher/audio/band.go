package audio

// Tee reads s for two consumers: each returned stream reads all of s. What
// one has read and the other not yet is buffered, so read them in step (a
// block from one, then the other up to the same time) to keep memory
// bounded.
func Tee(s Stream) (Stream, Stream) {
	t := &tee{src: s}
	return &teeReader{t: t, i: 0}, &teeReader{t: t, i: 1}
}

type tee struct {
	src   Stream
	buf   []float32 // source samples from index start
	start int64
	pos   [2]int64 // each reader's next sample
	err   error    // the source's error, once it returned one
	tmp   []float32
}

type teeReader struct {
	t *tee
	i int
}

func (r *teeReader) SampleRate() int { return r.t.src.SampleRate() }

func (r *teeReader) Read(out []float32) (int, error) {
	t := r.t
	end := t.start + int64(len(t.buf))
	if t.pos[r.i] == end {
		if t.err != nil {
			return 0, t.err
		}
		if t.tmp == nil {
			t.tmp = make([]float32, 8192)
		}
		n, err := t.src.Read(t.tmp[:min(len(t.tmp), max(len(out), 1))])
		t.buf = append(t.buf, t.tmp[:n]...)
		end += int64(n)
		if err != nil {
			t.err = err
			if n == 0 {
				return 0, err
			}
		}
	}
	n := copy(out, t.buf[t.pos[r.i]-t.start:])
	t.pos[r.i] += int64(n)
	// Drop what both have read, once it is a good part of the buffer.
	if done := min(t.pos[0], t.pos[1]) - t.start; done > 0 && done >= int64(len(t.buf)/2) {
		t.buf = append(t.buf[:0], t.buf[done:]...)
		t.start += done
	}
	return n, nil
}

// HighBandRate is the rate at which HighBand mirrors: the band it keeps is
// from HighBandRate/2 − 3.5 kHz to HighBandRate/2 (5.5 to 9 kHz).
const HighBandRate = 18000

// HighBand is s's band from 5.5 to 9 kHz at 8 kHz, mirrored into 0-3.5 kHz
// (a tone at f comes out at 9 kHz − f): s is resampled to HighBandRate,
// every other sample negated (which mirrors the spectrum about 4.5 kHz)
// and resampled to 8 kHz, whose filter keeps only what had been above
// 5.5 kHz. It lets an analysis built for telephone bandwidth see sounds
// that lie above it (an alarm's 7.7 kHz ring, a whistle), also played 2 %
// fast: mirrored about 8 kHz, a ring at 7.85 kHz fell below the analysed
// band. Below 16 kHz there is not enough of the band: ok is false.
func HighBand(s Stream) (high Stream, ok bool) {
	if s.SampleRate() < 16000 {
		return nil, false
	}
	return Resample(&mirror{Stream: Resample(s, HighBandRate)}, 8000), true
}

// mirror negates every other sample: at rate r, a tone at f becomes one at
// r/2 − f.
type mirror struct {
	Stream
	n int64 // samples read
}

func (m *mirror) Read(buf []float32) (int, error) {
	n, err := m.Stream.Read(buf)
	for i := int(1 - m.n&1); i < n; i += 2 {
		buf[i] = -buf[i]
	}
	m.n += int64(n)
	return n, err
}
