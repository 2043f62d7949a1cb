package locate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// An episode's print is what a Matcher takes from its audio, in the order
// it takes it: every analysed frame's band envelopes, then the landmark
// hashes the fingerprinter emitted after that frame. With the episode's
// samples at the analysis rate (to verify candidates), it is all a
// Matcher needs of the episode: replaying it (Matcher.Replay) gives the
// occurrences streaming the audio gives, with no decoding, resampling or
// fingerprinting. A print depends on the episode and Params only, not on
// the clips, so it is computed once per episode and replayed for every
// work item (services/researcher/artifact keeps them).
//
// The print's bytes, little-endian, frame after frame: the number of
// hashes n (uint32), the frame's Bands envelopes (float32), n hashes
// (uint32 hash, int32 anchor frame). The samples' bytes: float32 each.

// PrintWriter records an episode's print and samples as a Matcher
// streams the episode (Matcher.Record).
type PrintWriter struct {
	prints, samples io.Writer
	env             [Bands]float32
	hashes          []Hash
	open            bool
	buf             []byte
	info            PrintInfo
	err             error
}

// PrintInfo counts what a print holds.
type PrintInfo struct {
	// Frames, Hashes and Samples are the frames analysed, the hashes
	// emitted and the samples written.
	Frames  int64 `json:"frames"`
	Hashes  int64 `json:"hashes"`
	Samples int64 `json:"samples"`
}

// NewPrintWriter records a print to prints and the samples to samples,
// in writes of a frame's record and of a block of samples (buffer them
// where that matters: artifact writers do).
func NewPrintWriter(prints, samples io.Writer) *PrintWriter {
	return &PrintWriter{prints: prints, samples: samples}
}

// frame starts frame t's record with its envelopes.
func (w *PrintWriter) frame(e []float32) {
	w.endFrame()
	copy(w.env[:], e)
	w.open = true
	w.info.Frames++
}

func (w *PrintWriter) hash(h Hash) {
	if !w.open && w.err == nil {
		w.err = errors.New("locate: a hash before any frame")
	}
	w.hashes = append(w.hashes, h)
}

// endFrame writes the open frame's record.
func (w *PrintWriter) endFrame() {
	if !w.open || w.err != nil {
		return
	}
	b := binary.LittleEndian.AppendUint32(w.buf[:0], uint32(len(w.hashes)))
	for _, v := range w.env {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for _, h := range w.hashes {
		b = binary.LittleEndian.AppendUint32(b, h.H)
		b = binary.LittleEndian.AppendUint32(b, uint32(h.T))
	}
	w.buf = b
	_, w.err = w.prints.Write(b)
	w.info.Hashes += int64(len(w.hashes))
	w.hashes, w.open = w.hashes[:0], false
}

func (w *PrintWriter) writeSamples(x []float32) {
	if w.err != nil {
		return
	}
	var b []byte
	if littleEndian {
		b = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
	} else {
		b = w.buf[:0]
		for _, v := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		w.buf = b
	}
	_, w.err = w.samples.Write(b)
	w.info.Samples += int64(len(x))
}

// Close writes what is buffered (the last frame's record) and says what
// was recorded. It does not close the writers it was given.
func (w *PrintWriter) Close() (PrintInfo, error) {
	w.endFrame()
	return w.info, w.err
}

// Record has m write its episode's print and samples to low, and its high
// band's to high (nil: not recorded), as the episode streams through it
// (Write, WriteHigh, Stream). Call it before the first Write, and Close
// the writers after Finish.
func (m *Matcher) Record(low, high *PrintWriter) {
	m.rec = low
	if m.high != nil {
		m.high.rec = high
	}
}

// Print is a recorded print to replay: its bytes, and the episode's
// samples.
type Print struct {
	// Prints reads the print from its start.
	Prints io.Reader
	// Samples reads the samples, Info.Samples of them.
	Samples io.ReaderAt
	// Info counts what the print holds.
	Info PrintInfo
}

// Replay drives m with recorded prints instead of audio: low for the
// episode, and high for its high band (nil where the episode has none,
// as Stream gives the high band only to an episode of 16 kHz and more).
// Finish then gives the occurrences streaming the audio gave.
func (m *Matcher) Replay(ctx context.Context, low, high *Print) error {
	if err := m.replayPrint(ctx, low); err != nil {
		return err
	}
	if m.high != nil {
		m.high.MinConfidence, m.high.Explain = m.MinConfidence, m.Explain
		if high == nil { // no high band: nothing to replay there
			high = &Print{Prints: bytes.NewReader(nil)}
		}
		if err := m.high.replayPrint(ctx, high); err != nil {
			return fmt.Errorf("the high band: %w", err)
		}
	}
	return nil
}

func (m *Matcher) replayPrint(ctx context.Context, p *Print) error {
	if m.frames > 0 || m.replay != nil {
		return errors.New("locate: replay into a matcher that has been written to")
	}
	m.replay = &sampleWindow{r: p.Samples, n: p.Info.Samples}
	r := blockReader{r: p.Prints, buf: make([]byte, 0, 1<<20)}
	const head = 4 * (1 + Bands)
	// The most hashes a frame's record holds: those of every anchor whose
	// targets are all known at once, at the end (Fingerprinter.Flush).
	most := uint32(m.p.PeaksPerFrame * m.p.FanOut * (m.p.MaxDT + m.p.PeakDT + 2))
	var env [Bands]float32
	var hashes int64
	for t := int32(0); ; t++ {
		if t%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		b, err := r.next(head)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("locate: print frame %d: %w", t, err)
		}
		n := binary.LittleEndian.Uint32(b)
		for i := range env {
			env[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4+4*i:]))
		}
		if n > most {
			return fmt.Errorf("locate: print frame %d: %d hashes, more than a frame emits", t, n)
		}
		m.frame(t, env[:])
		if b, err = r.next(8 * int(n)); err != nil {
			return fmt.Errorf("locate: print frame %d: %w", t, io.ErrUnexpectedEOF)
		}
		for i := range int(n) {
			h := Hash{H: binary.LittleEndian.Uint32(b[8*i:]), T: int32(binary.LittleEndian.Uint32(b[8*i+4:]))}
			if h.H >= 1<<HashBits || h.T < 0 || h.T > t {
				return fmt.Errorf("locate: print frame %d: hash %#x at frame %d is none the fingerprinter makes", t, h.H, h.T)
			}
			m.vote(h)
		}
		hashes += int64(n)
	}
	if m.frames != int32(p.Info.Frames) && p.Info.Frames != 0 || hashes != p.Info.Hashes && p.Info.Hashes != 0 {
		return fmt.Errorf("locate: print of %d frames and %d hashes, %d and %d said", m.frames, hashes, p.Info.Frames, p.Info.Hashes)
	}
	return m.replay.err
}

// blockReader reads a print in large blocks and hands out its records as
// slices of them.
type blockReader struct {
	r   io.Reader
	buf []byte
	at  int
	eof bool
}

// next returns the next n bytes: io.EOF where none are left,
// io.ErrUnexpectedEOF where fewer than n are.
func (b *blockReader) next(n int) ([]byte, error) {
	for len(b.buf)-b.at < n && !b.eof {
		rest := copy(b.buf[:cap(b.buf)], b.buf[b.at:])
		if cap(b.buf) < n {
			b.buf = append(b.buf[:rest], make([]byte, n)...)
		}
		b.buf, b.at = b.buf[:rest], 0
		k, err := io.ReadFull(b.r, b.buf[rest:cap(b.buf)])
		b.buf = b.buf[:rest+k]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			b.eof = true
		} else if err != nil {
			return nil, err
		}
	}
	switch left := len(b.buf) - b.at; {
	case left == 0 && n > 0:
		return nil, io.EOF
	case left < n:
		return nil, io.ErrUnexpectedEOF
	}
	p := b.buf[b.at : b.at+n]
	b.at += n
	return p, nil
}

// littleEndian: float32s in memory are the bytes of a print's samples.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// sampleWindow reads a replayed episode's samples a window at a time:
// candidates are decided in the order of the episode, so a window read
// ahead serves the next ones.
type sampleWindow struct {
	r   io.ReaderAt
	n   int64
	buf []float32
	lo  int64
	err error
}

// windowSamples is how many samples a window reads at least (32 s).
const windowSamples = 1 << 18

func (w *sampleWindow) in(lo, hi int64) ([]float32, int64) {
	lo, hi = max(lo, 0), min(hi, w.n)
	if hi <= lo || w.err != nil {
		return nil, lo
	}
	if lo < w.lo || hi > w.lo+int64(len(w.buf)) {
		from := max(lo-windowSamples/8, 0) &^ 3 // aligned as the ring is
		to := min(max(hi, from+windowSamples), w.n)
		if cap(w.buf) < int(to-from) {
			w.buf = aligned(int(to - from))
		}
		w.buf = w.buf[:to-from]
		// The samples' bytes are read into the float32s themselves and
		// put in order in place (nothing to do on a little-endian CPU).
		raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.buf))), 4*len(w.buf))
		if k, err := w.r.ReadAt(raw, 4*from); k < len(raw) {
			w.buf, w.err = w.buf[:0], fmt.Errorf("locate: samples %d to %d of %d: %w", from, to, w.n, cmp.Or(err, io.ErrUnexpectedEOF))
			return nil, lo
		}
		if !littleEndian {
			for i := range w.buf {
				w.buf[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		}
		w.lo = from
	}
	return w.buf[lo-w.lo : hi-w.lo], lo
}
