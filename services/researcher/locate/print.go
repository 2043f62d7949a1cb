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
)

// An episode's print is what a Matcher takes from its audio, in the order
// it takes it: every analysed frame's band envelopes, then the peaks the
// fingerprinter picked after that frame, which pair into the landmark
// hashes the Matcher votes with (pairer: a replay pairs them again). With
// the episode's samples at the analysis rate, as their code keeps them
// (adpcm.go), to verify candidates, it is all a Matcher needs of the
// episode: replaying it (Matcher.Replay) gives the occurrences streaming
// the audio gives, with no decoding, resampling or spectral analysis. A
// print depends on the episode and Params only, not on the clips, so it is
// computed once per episode and replayed for every work item
// (services/researcher/artifact keeps them).
//
// The print's bytes, frame after frame: the frame's Bands envelopes, a
// byte each (quantizeEnv); the number of frames whose peaks were picked
// after it (uint8: one, none for the first PeakDT frames, the last
// PeakDT+1 after the last frame); for each of those frames, in order from
// the first, its number of peaks (uint8) and their bins in the order they
// pair (a byte each, two little-endian where MaxBin is 256 or more). A
// frame is about 30 bytes: 3.4 MB an episode-hour. The samples' bytes:
// ADPCM blocks, 14.4 MB an episode-hour (155 MB in all before, with
// every hash and float32 envelopes and samples).

// PrintWriter records an episode's print and samples as a Matcher
// streams the episode (Matcher.Record).
type PrintWriter struct {
	prints, samples io.Writer
	p               Params
	env             [Bands]byte
	groups          int    // frames whose peaks the open frame's record holds
	picked          []byte // their peaks' records
	open            bool
	buf             []byte
	info            PrintInfo
	err             error
}

// PrintInfo counts what a print holds.
type PrintInfo struct {
	// Frames, Hashes and Samples are the frames analysed, the hashes
	// their peaks pair into and the samples written.
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

// wideBins tells whether a print of p writes a bin in two bytes.
func wideBins(p Params) bool { return p.MaxBin > 255 }

// frame starts a frame's record with its envelopes' bytes.
func (w *PrintWriter) frame(q []byte) {
	w.endFrame()
	copy(w.env[:], q)
	w.open = true
	w.info.Frames++
}

// peaks adds the peaks of the next frame picked to the open record.
func (w *PrintWriter) peaks(ps []Peak) {
	if !w.open && w.err == nil {
		w.err = errors.New("locate: peaks before any frame")
	}
	w.groups++
	w.picked = append(w.picked, byte(len(ps)))
	for _, p := range ps {
		if wideBins(w.p) {
			w.picked = binary.LittleEndian.AppendUint16(w.picked, uint16(p.F))
		} else {
			w.picked = append(w.picked, byte(p.F))
		}
	}
}

// hash counts a hash the peaks paired into.
func (w *PrintWriter) hash() { w.info.Hashes++ }

// endFrame writes the open frame's record.
func (w *PrintWriter) endFrame() {
	if !w.open || w.err != nil {
		return
	}
	b := append(w.buf[:0], w.env[:]...)
	b = append(b, byte(w.groups))
	b = append(b, w.picked...)
	w.buf = b
	_, w.err = w.prints.Write(b)
	w.groups, w.picked, w.open = 0, w.picked[:0], false
}

// block writes a block of the samples' code, of n samples.
func (w *PrintWriter) block(b []byte, n int) {
	if w.err != nil {
		return
	}
	_, w.err = w.samples.Write(b)
	w.info.Samples += int64(n)
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
	m.record(low)
	if m.high != nil {
		m.high.record(high)
	}
}

func (m *Matcher) record(w *PrintWriter) {
	m.rec, m.enc.out = w, nil
	if w != nil {
		w.p, m.enc.out = m.p, w.block
	}
}

// Print is a recorded print to replay: its bytes, and the episode's
// samples.
type Print struct {
	// Prints reads the print from its start.
	Prints io.Reader
	// Samples reads the samples' code (adpcm.go), Info.Samples of them;
	// where it has a Size method, that is checked first.
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
	if sz, ok := p.Samples.(interface{ Size() int64 }); ok && sz.Size() != adpcmBytes(p.Info.Samples) {
		return fmt.Errorf("locate: %d bytes of samples, %d samples' code is %d", sz.Size(), p.Info.Samples, adpcmBytes(p.Info.Samples))
	}
	m.replay = &sampleWindow{r: p.Samples, n: p.Info.Samples}
	r := blockReader{r: p.Prints, buf: make([]byte, 0, 1<<20)}
	bin := 1
	if wideBins(m.p) {
		bin = 2
	}
	var hashes int64
	pr := pairer{p: m.p, emit: func(h Hash) { hashes++; m.vote(h) }}
	picked := int32(0) // the next frame whose peaks come
	for t := int32(0); ; t++ {
		if t%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		b, err := r.next(Bands + 1)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("locate: print frame %d: %w", t, err)
		}
		m.frame(t, b)
		groups := int(b[Bands])
		if groups > m.p.PeakDT+1 {
			return fmt.Errorf("locate: print frame %d: the peaks of %d frames, more than a frame picks", t, groups)
		}
		for range groups {
			if picked > t {
				return fmt.Errorf("locate: print frame %d: the peaks of frame %d, not yet analysed", t, picked)
			}
			c, err := r.next(1)
			if err != nil {
				return fmt.Errorf("locate: print frame %d: %w", t, io.ErrUnexpectedEOF)
			}
			k := int(c[0])
			if k > m.p.PeaksPerFrame {
				return fmt.Errorf("locate: print frame %d: %d peaks, more than a frame has", t, k)
			}
			bins, err := r.next(bin * k)
			if err != nil {
				return fmt.Errorf("locate: print frame %d: %w", t, io.ErrUnexpectedEOF)
			}
			for i := range k {
				f := int(bins[i])
				if bin == 2 {
					f = int(binary.LittleEndian.Uint16(bins[2*i:]))
				}
				if f < m.p.MinBin || f > m.p.MaxBin {
					return fmt.Errorf("locate: print frame %d: a peak at bin %d, outside those analysed", t, f)
				}
				pr.peaks = append(pr.peaks, Peak{T: picked, F: int16(f)})
			}
			pr.pair(picked - int32(m.p.MaxDT))
			picked++
		}
	}
	pr.pair(math.MaxInt32)
	if picked != m.frames {
		return fmt.Errorf("locate: print of %d frames holds the peaks of %d", m.frames, picked)
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

// sampleWindow reads a replayed episode's samples: the blocks a candidate
// needs, decoded once and kept (the most recent windowBlocks of them), so
// that the candidates of long and short clips, decided in turns seconds
// apart, and those next to each other, decode each block once; and only
// the blocks candidates need are decoded.
type sampleWindow struct {
	r   io.ReaderAt
	n   int64
	buf []float32
	lo  int64
	raw []byte
	// blocks holds decoded blocks by their index, slots their samples
	// (adpcmBlock each), fifo the order they were decoded in.
	blocks map[int64]int
	slots  []float32
	fifo   []int64
	err    error
}

// windowBlocks is how many decoded blocks are kept (4 MiB: 128 s).
const windowBlocks = 256

func (w *sampleWindow) in(lo, hi int64) ([]float32, int64) {
	lo, hi = max(lo, 0), min(hi, w.n)
	if hi <= lo || w.err != nil {
		return nil, lo
	}
	if lo < w.lo || hi > w.lo+int64(len(w.buf)) {
		// The blocks [lo, hi) is in: from a block's start (a multiple of
		// 4, aligned as the ring is).
		from := lo / adpcmBlock * adpcmBlock
		to := min((hi+adpcmBlock-1)/adpcmBlock*adpcmBlock, w.n)
		if cap(w.buf) < int(to-from) {
			w.buf = aligned(int(to - from))
		}
		w.buf = w.buf[:to-from]
		if err := w.fill(from, to); err != nil {
			w.buf, w.err = w.buf[:0], fmt.Errorf("locate: samples %d to %d of %d: %w", from, to, w.n, err)
			return nil, lo
		}
		w.lo = from
	}
	return w.buf[lo-w.lo : hi-w.lo], lo
}

// fill puts samples [from, to) in w.buf, from the decoded blocks kept and
// the others read (each run of them in one read) and decoded, each copied
// as it is at hand.
func (w *sampleWindow) fill(from, to int64) error {
	if w.blocks == nil {
		w.blocks = map[int64]int{}
	}
	put := func(b int64) {
		start := b * adpcmBlock
		lo, hi := max(start, from), min(start+adpcmBlock, to)
		copy(w.buf[lo-from:hi-from], w.slots[w.blocks[b]*adpcmBlock+int(lo-start):])
	}
	first, last := from/adpcmBlock, (to-1)/adpcmBlock
	for b := first; b <= last; {
		if _, ok := w.blocks[b]; ok {
			put(b)
			b++
			continue
		}
		// A run of blocks not kept: read at once, decoded a block at a time.
		end := b
		for end < last && end-b+1 < windowBlocks/2 {
			if _, ok := w.blocks[end+1]; ok {
				break
			}
			end++
		}
		at := adpcmBytes(b * adpcmBlock)
		size := adpcmBytes(min((end+1)*adpcmBlock, w.n)) - at
		if int64(cap(w.raw)) < size {
			w.raw = make([]byte, size)
		}
		w.raw = w.raw[:size]
		if k, err := w.r.ReadAt(w.raw, at); k < len(w.raw) {
			return cmp.Or(err, io.ErrUnexpectedEOF)
		}
		for k := b; k <= end; k++ {
			n := min(adpcmBlock, w.n-k*adpcmBlock)
			slot := w.slot(k)
			if err := adpcmDecode(w.slots[slot*adpcmBlock:][:n], w.raw[(k-b)*adpcmBlockBytes:]); err != nil {
				delete(w.blocks, k)
				return err
			}
			put(k)
		}
		b = end + 1
	}
	return nil
}

// slot is where block b's samples go: a free slot, or the oldest block's.
func (w *sampleWindow) slot(b int64) int {
	var s int
	if len(w.fifo) < windowBlocks {
		s = len(w.fifo)
		if w.slots == nil {
			w.slots = make([]float32, windowBlocks*adpcmBlock)
		}
	} else {
		old := w.fifo[0]
		w.fifo = w.fifo[1:]
		s = w.blocks[old]
		delete(w.blocks, old)
	}
	w.fifo = append(w.fifo, b)
	w.blocks[b] = s
	return s
}
