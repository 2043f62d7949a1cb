package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// This file is longer than the house's 700 lines on purpose: a FLAC
// decoder is one format's bit reader, frame and subframe parsers,
// predictors and CRCs, tuned together (the bit reader's peeks feed the
// residual loop); RFC 9639 is read best in one place.

// This file is a FLAC decoder (RFC 9639). It replaced github.com/mewkiz/flac
// in the locator's path because that library, correct as it is, reads its
// residuals a bit at a time and decoded a 2-hour episode at 262-299× realtime
// on one core, under the locator's target of 300× for the whole locate; this
// one reads 64 bits at a time, counts a Rice quotient's zeros in one
// instruction and keeps the LPC history in registers: 4.7-5.2× as fast in
// BenchmarkFLACDecode, side by side (docs/PERFORMANCE.md). The library
// stays as the reference the tests compare every sample with.
//
// Every bound of the format is checked before it is used: metadata before
// the first frame (64 MiB), block size (65,535), channels (8), LPC order
// (32) and precision (15), partition order against the block size, wasted
// bits against the sample size, and a Rice quotient longer than any 32-bit
// sample. A frame whose CRC-8 header or CRC-16 body does not match is
// corrupt.

// flacMaxBlock is the largest block size RFC 9639 allows.
const flacMaxBlock = 65535

// flacMaxMetadata bounds the metadata skipped before the first frame
// (pictures, tags, padding): a stream of metadata blocks without end would
// otherwise be read for ever without a sample to count against the
// duration bound.
const flacMaxMetadata = 64 << 20

// errFLACCorrupt is wrapped by every error about the file's own bytes.
var errFLACCorrupt = errors.New("flac")

func flacErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errFLACCorrupt, fmt.Sprintf(format, a...))
}

// flacBits reads bits from r through a buffer, most significant first. Bits
// are taken 64 at a time (peek) from wherever pos points; the buffer keeps 8
// zero bytes past its data so that a peek never leaves it, and fill is called
// before pos passes safe, beyond which a peek would not see 64 bits of data.
// The frame's CRC-16 is folded over the bytes a fill discards.
type flacBits struct {
	r    io.Reader
	buf  []byte // data in buf[:n], zeros in buf[n:n+8]
	n    int
	pos  uint // bit position in buf
	safe uint // fill before reading at pos >= safe
	eof  bool

	crc     uint16 // CRC-16 of the frame's bytes before crcFrom
	crcFrom int
}

const flacBufSize = 128 << 10

func newFLACBits(r io.Reader) *flacBits {
	return &flacBits{r: r, buf: make([]byte, flacBufSize+8)}
}

// fill moves the unread bytes to the front of the buffer and reads more.
// Past the end of the data it fails with io.ErrUnexpectedEOF.
func (b *flacBits) fill() error {
	if b.eof {
		if b.pos >= uint(b.n)*8 {
			return io.ErrUnexpectedEOF
		}
		return nil
	}
	start := int(b.pos >> 3)
	b.crc = crc16(b.crc, b.buf[b.crcFrom:start])
	b.n = copy(b.buf, b.buf[start:b.n])
	b.pos -= uint(start) * 8
	b.crcFrom = 0
	for empty := 0; b.n < flacBufSize && !b.eof; {
		m, err := b.r.Read(b.buf[b.n:flacBufSize])
		b.n += m
		switch {
		case err == io.EOF:
			b.eof = true
		case err != nil:
			return err
		case m == 0:
			if empty++; empty > 100 {
				return io.ErrNoProgress
			}
		}
		if m > 0 && b.n >= 64<<10 {
			break // enough for now; do not wait on a slow reader
		}
	}
	clear(b.buf[b.n : b.n+8])
	if b.eof {
		b.safe = uint(b.n) * 8
		if b.pos >= b.safe {
			return io.ErrUnexpectedEOF
		}
	} else {
		b.safe = uint(b.n-8) * 8
	}
	return nil
}

// ensure makes at least k bytes (k <= 64 KiB) readable without a fill, or
// as many as there are.
func (b *flacBits) ensure(k int) error {
	if b.n-int(b.pos>>3) >= k+8 || b.eof {
		return nil
	}
	return b.fill()
}

// left is the number of whole bytes not yet read.
func (b *flacBits) left() int { return b.n - int((b.pos+7)>>3) }

func (b *flacBits) peek() uint64 {
	return binary.BigEndian.Uint64(b.buf[b.pos>>3:]) << (b.pos & 7)
}

// bits reads k <= 56 bits.
func (b *flacBits) bits(k uint) (uint64, error) {
	if b.pos >= b.safe {
		if err := b.fill(); err != nil {
			return 0, err
		}
	}
	v := b.peek() >> (64 - k) // a shift of 64 is 0 in Go: bits(0) is 0
	b.pos += k
	return v, nil
}

// signed reads a k-bit two's complement number, k <= 32.
func (b *flacBits) signed(k uint) (int32, error) {
	v, err := b.bits(k)
	if k == 0 {
		return 0, err
	}
	return int32(int64(v<<(64-k)) >> (64 - k)), err
}

// unary counts zero bits up to a one, which it consumes.
func (b *flacBits) unary(max uint) (uint, error) {
	var q uint
	for {
		if b.pos >= b.safe {
			if err := b.fill(); err != nil {
				return 0, err
			}
		}
		if z := uint(bits.LeadingZeros64(b.peek())); z < 57 {
			b.pos += z + 1
			return q + z, nil
		}
		b.pos += 56
		if q += 56; q > max {
			return 0, flacErrorf("unary code longer than %d bits", max)
		}
	}
}

// skip passes over k bytes, whole bytes from a byte boundary.
func (b *flacBits) skip(k int) error {
	for {
		avail := b.n - int(b.pos>>3)
		if avail >= k {
			b.pos += uint(k) * 8
			return nil
		}
		k -= avail
		b.pos = uint(b.n) * 8
		b.crcFrom = b.n
		if b.eof {
			return io.ErrUnexpectedEOF
		}
		if err := b.fill(); err != nil {
			return err
		}
	}
}

// rice reads len(dst) Rice-coded residuals with parameter k (k <= 30):
// each code's zeros counted in one instruction from a 64-bit peek.
func (b *flacBits) rice(dst []int32, k uint) error {
	buf, pos, safe := b.buf, b.pos, b.safe // in registers: dst may alias b
	for i := range dst {
		if pos >= safe {
			b.pos = pos
			if err := b.fill(); err != nil {
				return err
			}
			buf, pos, safe = b.buf, b.pos, b.safe
		}
		v := binary.BigEndian.Uint64(buf[pos>>3:]) << (pos & 7)
		q := uint(bits.LeadingZeros64(v))
		var u uint64
		if q+1+k <= 57 {
			u = uint64(q)<<k | (v<<(q+1))>>(64-k)
			pos += q + 1 + k
		} else {
			// A quotient longer than the window: as long as 32-bit
			// residuals allow, then the k low bits.
			b.pos = pos
			q, err := b.unary(32 + 56)
			if err != nil {
				return err
			}
			low, err := b.bits(k)
			if err != nil {
				return err
			}
			u = uint64(q)<<k | low
			buf, pos, safe = b.buf, b.pos, b.safe
		}
		if u > 0xFFFFFFFF {
			b.pos = pos
			return flacErrorf("Rice-coded residual %d beyond 32 bits", u)
		}
		dst[i] = int32(uint32(u)>>1) ^ -int32(uint32(u)&1)
	}
	b.pos = pos
	return nil
}

// flacStream decodes FLAC frame by frame and downmixes it to mono.
type flacStream struct {
	br       *flacBits
	rate     int
	channels int
	bps      int
	scale    float32
	frame    int       // frames decoded
	ch       [][]int32 // the current frame's samples per channel
	pending  []float32
	coefs    [32]int32
}

func openFLAC(r io.Reader) (*flacStream, error) {
	b := newFLACBits(r)
	if err := b.fill(); err != nil {
		return nil, err
	}
	if b.left() < 4 || string(b.buf[:4]) != "fLaC" {
		return nil, flacErrorf("no fLaC marker")
	}
	b.pos = 32
	f := &flacStream{br: b}
	metadata := 0
	for first := true; ; first = false {
		if err := b.ensure(4); err != nil {
			return nil, err
		}
		last, _ := b.bits(1)
		typ, _ := b.bits(7)
		size, err := b.bits(24)
		if err != nil {
			return nil, err
		}
		switch {
		case first != (typ == 0):
			return nil, flacErrorf("metadata block %d where STREAMINFO must be first and only", typ)
		case typ == 127:
			return nil, flacErrorf("metadata block of the invalid type 127")
		case typ == 0:
			if size != 34 {
				return nil, flacErrorf("STREAMINFO of %d bytes, not 34", size)
			}
			if err := f.streamInfo(); err != nil {
				return nil, err
			}
		default:
			if metadata += 4 + int(size); metadata > flacMaxMetadata {
				return nil, &LimitError{Bound: "FLAC metadata", Limit: fmt.Sprintf("%d MiB", flacMaxMetadata>>20)}
			}
			if err := b.skip(int(size)); err != nil {
				return nil, err
			}
		}
		if last == 1 {
			break
		}
	}
	return f, nil
}

func (f *flacStream) streamInfo() error {
	b := f.br
	if err := b.ensure(34); err != nil {
		return err
	}
	b.bits(16) // min block size
	b.bits(16) // max block size
	b.bits(24) // min frame size
	b.bits(24) // max frame size
	rate, _ := b.bits(20)
	ch, _ := b.bits(3)
	bps, _ := b.bits(5)
	b.bits(36) // total samples
	b.bits(32) // MD5, not checked
	b.bits(32)
	b.bits(32)
	if _, err := b.bits(32); err != nil {
		return err
	}
	f.rate, f.channels, f.bps = int(rate), int(ch)+1, int(bps)+1
	if f.bps < 4 {
		return fmt.Errorf("%d bits per sample (4 to 32)", f.bps)
	}
	f.scale = 1 / float32(int64(1)<<(f.bps-1))
	return nil
}

func (f *flacStream) SampleRate() int { return f.rate }

func (f *flacStream) Read(buf []float32) (int, error) {
	for len(f.pending) == 0 {
		n, err := f.next()
		if err != nil {
			return 0, err // io.EOF at the end
		}
		if cap(f.pending) < n {
			f.pending = make([]float32, flacMaxBlock)
		}
		f.pending = f.pending[:n]
		scale := f.scale / float32(f.channels)
		switch f.channels {
		case 1:
			for i, v := range f.ch[0][:n] {
				f.pending[i] = float32(v) * scale
			}
		case 2:
			l, r := f.ch[0][:n], f.ch[1][:n]
			for i := range f.pending {
				f.pending[i] = float32(int64(l[i])+int64(r[i])) * scale
			}
		default:
			for i := range f.pending {
				var sum int64
				for c := range f.channels {
					sum += int64(f.ch[c][i])
				}
				f.pending[i] = float32(sum) * scale
			}
		}
	}
	n := copy(buf, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

var flacBlockSizes = [16]int{0, 192, 576, 1152, 2304, 4608, -8, -16, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}

var flacSampleSizes = [8]int{0, 8, 12, -1, 16, 20, 24, 32}

// next decodes a frame into f.ch and returns its block size; io.EOF where
// the stream ends between frames.
func (f *flacStream) next() (int, error) {
	b := f.br
	if err := b.ensure(32); err != nil {
		return 0, err
	}
	if b.left() == 0 && b.eof {
		return 0, io.EOF
	}
	start := int(b.pos >> 3)
	b.crc, b.crcFrom = 0, start
	hdr, _ := b.bits(32)
	if hdr>>17 != 0x7FFC {
		return 0, flacErrorf("frame %d: no frame sync code", f.frame)
	}
	bsCode, srCode, chCode, ssCode := hdr>>12&15, hdr>>8&15, int(hdr>>4&15), hdr>>1&7
	if hdr&1 != 0 || ssCode == 3 || srCode == 15 || chCode > 10 || bsCode == 0 {
		return 0, flacErrorf("frame %d: reserved value in the header", f.frame)
	}
	// The frame or sample number, UTF-8 coded in 1 to 7 bytes.
	first, _ := b.bits(8)
	ones := bits.LeadingZeros8(^uint8(first))
	if ones == 1 || ones > 7 {
		return 0, flacErrorf("frame %d: bad coded frame number", f.frame)
	}
	for i := 1; i < ones; i++ {
		if c, _ := b.bits(8); c>>6 != 2 {
			return 0, flacErrorf("frame %d: bad coded frame number", f.frame)
		}
	}
	block := flacBlockSizes[bsCode]
	if block < 0 {
		v, _ := b.bits(uint(-block))
		block = int(v) + 1
	}
	switch srCode {
	case 12:
		b.bits(8)
	case 13, 14:
		b.bits(16)
	}
	sum, err := b.bits(8)
	if err != nil {
		return 0, err
	}
	if block > flacMaxBlock {
		return 0, flacErrorf("frame %d: block of %d samples beyond the limit of %d", f.frame, block, flacMaxBlock)
	}
	if got := crc8(b.buf[start : b.pos>>3-1]); uint64(got) != sum {
		return 0, flacErrorf("frame %d: header CRC-8 %#02x, computed %#02x", f.frame, sum, got)
	}
	channels := chCode + 1
	if chCode >= 8 {
		channels = 2
	}
	if channels != f.channels {
		return 0, flacErrorf("frame %d: %d channels where STREAMINFO says %d", f.frame, channels, f.channels)
	}
	if bps := flacSampleSizes[ssCode]; bps != 0 && bps != f.bps {
		return 0, flacErrorf("frame %d: %d bits per sample where STREAMINFO says %d", f.frame, bps, f.bps)
	}
	if len(f.ch) == 0 {
		f.ch = make([][]int32, f.channels)
	}
	for c := range f.ch {
		if cap(f.ch[c]) < block {
			f.ch[c] = make([]int32, flacMaxBlock)
		}
		bps := f.bps
		if chCode == 8 && c == 1 || chCode == 9 && c == 0 || chCode == 10 && c == 1 {
			bps++ // the side channel
		}
		if bps > 32 {
			return 0, flacErrorf("frame %d: a 33-bit side channel (32-bit stereo decorrelation) is not supported", f.frame)
		}
		if err := f.subframe(f.ch[c][:block], uint(bps)); err != nil {
			return 0, fmt.Errorf("frame %d channel %d: %w", f.frame, c, err)
		}
	}
	switch chCode {
	case 8: // left, side
		l, s := f.ch[0][:block], f.ch[1][:block]
		for i := range s {
			s[i] = l[i] - s[i]
		}
	case 9: // side, right
		s, r := f.ch[0][:block], f.ch[1][:block]
		for i := range s {
			s[i] += r[i]
		}
	case 10: // mid, side
		m, s := f.ch[0][:block], f.ch[1][:block]
		for i := range s {
			mid := int64(m[i])<<1 | int64(s[i]&1)
			m[i], s[i] = int32((mid+int64(s[i]))>>1), int32((mid-int64(s[i]))>>1)
		}
	}
	// Zero padding to the byte, then the CRC-16 of everything before it.
	b.pos = (b.pos + 7) &^ 7
	end := int(b.pos >> 3)
	if end > b.n {
		return 0, io.ErrUnexpectedEOF
	}
	got := crc16(b.crc, b.buf[b.crcFrom:end])
	want, err := b.bits(16)
	if err != nil {
		return 0, err
	}
	if b.pos > uint(b.n)*8 {
		return 0, io.ErrUnexpectedEOF
	}
	if uint64(got) != want {
		return 0, flacErrorf("frame %d: CRC-16 %#04x, computed %#04x", f.frame, want, got)
	}
	f.frame++
	return block, nil
}

// subframe decodes one channel's subframe into x at bps bits per sample.
func (f *flacStream) subframe(x []int32, bps uint) error {
	b := f.br
	h, err := b.bits(8)
	if err != nil {
		return err
	}
	if h&0x80 != 0 {
		return flacErrorf("subframe padding bit set")
	}
	if h&1 != 0 { // wasted bits
		k, err := b.unary(32)
		if err != nil {
			return err
		}
		if k+1 >= bps {
			return flacErrorf("%d wasted bits of a %d-bit sample", k+1, bps)
		}
		bps -= k + 1
		defer func() {
			for i := range x {
				x[i] <<= k + 1
			}
		}()
	}
	typ := h >> 1 & 63
	switch {
	case typ == 0: // constant
		v, err := b.signed(bps)
		for i := range x {
			x[i] = v
		}
		return err
	case typ == 1: // verbatim
		for i := range x {
			if x[i], err = b.signed(bps); err != nil {
				return err
			}
		}
		return nil
	case typ >= 8 && typ <= 12:
		order := int(typ - 8)
		if err := f.warmup(x, order, bps); err != nil {
			return err
		}
		if err := f.residual(x, order); err != nil {
			return err
		}
		fixedPredict(x, order)
		return nil
	case typ >= 32:
		order := int(typ-32) + 1
		if err := f.warmup(x, order, bps); err != nil {
			return err
		}
		p, _ := b.bits(4)
		shift, err := b.signed(5)
		if err != nil {
			return err
		}
		if p == 15 {
			return flacErrorf("LPC coefficient precision of the invalid value 15")
		}
		if shift < 0 {
			return flacErrorf("negative LPC shift %d", shift)
		}
		coefs := f.coefs[:order]
		// Stored newest first: coefs[j] multiplies x[i-1-j].
		for j := range coefs {
			if coefs[j], err = b.signed(uint(p) + 1); err != nil {
				return err
			}
		}
		if err := f.residual(x, order); err != nil {
			return err
		}
		lpcPredict(x, coefs, uint(shift))
		return nil
	}
	return flacErrorf("subframe of the reserved type %d", typ)
}

func (f *flacStream) warmup(x []int32, order int, bps uint) error {
	if order > len(x) {
		return flacErrorf("predictor order %d beyond the block of %d", order, len(x))
	}
	var err error
	for i := range order {
		if x[i], err = f.br.signed(bps); err != nil {
			return err
		}
	}
	return nil
}

// residual reads the residual of a predicted subframe into x[order:].
func (f *flacStream) residual(x []int32, order int) error {
	b := f.br
	method, _ := b.bits(2)
	po, err := b.bits(4)
	if err != nil {
		return err
	}
	if method > 1 {
		return flacErrorf("residual coding method %d is reserved", method)
	}
	pbits, escape := uint(4), uint64(15)
	if method == 1 {
		pbits, escape = 5, 31
	}
	parts := 1 << po
	if len(x)%parts != 0 || len(x)>>po < order {
		return flacErrorf("partition order %d does not divide the block of %d with predictor order %d", po, len(x), order)
	}
	size := len(x) >> po
	i := order
	for p := range parts {
		end := (p + 1) * size
		k, err := b.bits(pbits)
		if err != nil {
			return err
		}
		if k != escape {
			if err := b.rice(x[i:end], uint(k)); err != nil {
				return err
			}
			i = end
			continue
		}
		n, err := b.bits(5)
		if err != nil {
			return err
		}
		for ; i < end; i++ {
			if x[i], err = b.signed(uint(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fixedPredict adds the fixed predictor of order to the residuals in
// x[order:].
func fixedPredict(x []int32, order int) {
	switch order {
	case 1:
		for i := 1; i < len(x); i++ {
			x[i] += x[i-1]
		}
	case 2:
		for i := 2; i < len(x); i++ {
			x[i] += int32(2*int64(x[i-1]) - int64(x[i-2]))
		}
	case 3:
		for i := 3; i < len(x); i++ {
			x[i] += int32(3*int64(x[i-1]) - 3*int64(x[i-2]) + int64(x[i-3]))
		}
	case 4:
		for i := 4; i < len(x); i++ {
			x[i] += int32(4*int64(x[i-1]) - 6*int64(x[i-2]) + 4*int64(x[i-3]) - int64(x[i-4]))
		}
	}
}

// lpcPredict adds the linear prediction of coefs (newest first) to the
// residuals in x[len(coefs):].
func lpcPredict(x []int32, coefs []int32, shift uint) {
	order := len(coefs)
	switch {
	case order <= 8:
		lpc8(x, coefs, shift)
		return
	case order <= 12:
		lpc12(x, coefs, shift)
		return
	}
	var rev [32]int64 // oldest first, to walk x forwards
	for j, c := range coefs {
		rev[order-1-j] = int64(c)
	}
	r := rev[:order]
	for i := order; i < len(x); i++ {
		h := x[i-order : i]
		h = h[:len(r)]
		var sum int64
		for j, c := range r {
			sum += c * int64(h[j])
		}
		x[i] += int32(sum >> shift)
	}
}

// lpc8 is lpcPredict for orders up to 8, the history kept in registers,
// oldest first, padded with zero coefficients: no store to load on the
// chain from one sample to the next.
func lpc8(x []int32, coefs []int32, shift uint) {
	order := len(coefs)
	var c, h [8]int64
	for j, v := range coefs { // coefs[j] multiplies x[i-1-j]
		c[7-j], h[7-j] = int64(v), int64(x[order-1-j])
	}
	c0, c1, c2, c3, c4, c5, c6, c7 := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
	h0, h1, h2, h3, h4, h5, h6, h7 := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
	for i := order; i < len(x); i++ {
		sum := c0*h0 + c1*h1 + c2*h2 + c3*h3 + c4*h4 + c5*h5 + c6*h6
		v := x[i] + int32((sum+c7*h7)>>shift)
		x[i] = v
		h0, h1, h2, h3, h4, h5, h6, h7 = h1, h2, h3, h4, h5, h6, h7, int64(v)
	}
}

// lpc12 is lpc8 for orders 9 to 12 (the flac tool's -8 uses 12).
func lpc12(x []int32, coefs []int32, shift uint) {
	order := len(coefs)
	var c, h [12]int64
	for j, v := range coefs {
		c[11-j], h[11-j] = int64(v), int64(x[order-1-j])
	}
	c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11]
	h0, h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11 := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11]
	for i := order; i < len(x); i++ {
		sum := c0*h0 + c1*h1 + c2*h2 + c3*h3 + c4*h4 + c5*h5 + c6*h6 + c7*h7 + c8*h8 + c9*h9 + c10*h10
		v := x[i] + int32((sum+c11*h11)>>shift)
		x[i] = v
		h0, h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11 = h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11, int64(v)
	}
}

var crc8Table, crc16Tables = func() (t8 [256]uint8, t16 [8][256]uint16) {
	for i := range 256 {
		c8, c16 := uint8(i), uint16(i)<<8
		for range 8 {
			c8 = c8<<1 ^ uint8(-(c8>>7))&0x07
			c16 = c16<<1 ^ uint16(-(c16>>15))&0x8005
		}
		t8[i], t16[0][i] = c8, c16
	}
	// t16[k][b] is the CRC of b followed by k zero bytes: eight bytes at
	// a time (slicing by 8).
	for k := 1; k < 8; k++ {
		for i := range 256 {
			c := t16[k-1][i]
			t16[k][i] = c<<8 ^ t16[0][c>>8]
		}
	}
	return
}()

// crc8 is FLAC's header CRC (polynomial 0x07).
func crc8(p []byte) uint8 {
	var c uint8
	for _, v := range p {
		c = crc8Table[c^v]
	}
	return c
}

// crc16 continues FLAC's frame CRC (polynomial 0x8005) over p.
func crc16(c uint16, p []byte) uint16 {
	t := &crc16Tables
	for len(p) >= 8 {
		c = t[7][p[0]^byte(c>>8)] ^ t[6][p[1]^byte(c)] ^ t[5][p[2]] ^ t[4][p[3]] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, v := range p {
		c = c<<8 ^ t[0][byte(c>>8)^v]
	}
	return c
}
