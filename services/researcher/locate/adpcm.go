package locate

import (
	"encoding/binary"
	"fmt"
	"math"
)

// An episode's samples are kept, and compared with a clip's, as 4-bit IMA
// ADPCM (the Interactive Multimedia Association's adaptive differential
// code, as WAV files hold it): 4 bits a sample where float32 took 32, so an
// episode-hour's samples at 8 kHz are 14.4 MB instead of 115. The code
// adapts its step to the signal, so its noise sits some 21 dB under the
// passage whatever its level (on the evaluation corpus's episodes, clean,
// at 0 dB SNR, MP3 and GSM alike): a clip's correlation with the passage
// it plays in falls by four thousandths (docs/PERFORMANCE.md measures the
// tables before and after). A linear predictor of order 8 fitted per block
// gained 1 to 1.5 dB there, not worth its cost. The Matcher compares clips
// with the coded samples whether it streams or replays, so the two find
// the same.
//
// The samples are coded in blocks of adpcmBlock, each decoded alone, in
// integers (the same samples on every CPU): a block is the sample of its
// start (int16), the step index (uint8), a zero byte, and the codes of its
// other samples, two a byte, the earlier in the low half. The last block
// holds what is left, its last byte padded.

// adpcmBlock is how many samples a block codes.
const adpcmBlock = 4096

// adpcmHead is the size of a block's header.
const adpcmHead = 4

// adpcmBlockBytes is the size of a whole block.
const adpcmBlockBytes = adpcmHead + adpcmBlock/2

// adpcmBytes is the size of n samples' blocks.
func adpcmBytes(n int64) int64 {
	whole, rest := n/adpcmBlock, n%adpcmBlock
	size := whole * adpcmBlockBytes
	if rest > 0 {
		size += adpcmHead + rest/2
	}
	return size
}

var adpcmSteps = [89]int32{
	7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45,
	50, 55, 60, 66, 73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230,
	253, 279, 307, 337, 371, 408, 449, 494, 544, 598, 658, 724, 796, 876, 963,
	1060, 1166, 1282, 1411, 1552, 1707, 1878, 2066, 2272, 2499, 2749, 3024, 3327,
	3660, 4026, 4428, 4871, 5358, 5894, 6484, 7132, 7845, 8630, 9493, 10442,
	11487, 12635, 13899, 15289, 16818, 18500, 20350, 22385, 24623, 27086, 29794,
	32767,
}

var adpcmIndexStep = [8]int32{-1, -1, -1, -1, 2, 4, 6, 8}

// adpcmState is the coder's state, the same in the encoder and the
// decoder: the last sample decoded (the next one's prediction) and the
// step index.
type adpcmState struct {
	pred, index int32
}

// step applies the next sample's code and returns the sample it decodes
// to. (Without branches on the code: its sign and size are as good as
// random, and a mispredicted branch cost more than the rest.)
func (s *adpcmState) step(nibble byte) int32 {
	d := adpcmDelta[s.index][nibble&7]
	neg := -int32(nibble >> 3) // −1 where the code is negative, else 0
	s.pred = min(max(s.pred+(d^neg)-neg, math.MinInt16), math.MaxInt16)
	s.index = int32(adpcmNext[s.index][nibble&7])
	return s.pred
}

// adpcmDelta is the step a code's magnitude (its low 3 bits) adds at a step
// index, and adpcmNext the step index after it: IMA's arithmetic in tables.
var adpcmDelta, adpcmNext = func() (delta [89][8]int32, next [89][8]uint8) {
	for i, st := range adpcmSteps {
		for n := range int32(8) {
			d := st >> 3
			if n&4 != 0 {
				d += st
			}
			if n&2 != 0 {
				d += st >> 1
			}
			if n&1 != 0 {
				d += st >> 2
			}
			delta[i][n] = d
			next[i][n] = uint8(min(max(int32(i)+adpcmIndexStep[n], 0), int32(len(adpcmSteps)-1)))
		}
	}
	return delta, next
}()

// nibble is the code of x (the nearest the step allows), as IMA's
// encoder finds it bit by bit, without branches.
func (s *adpcmState) nibble(x int32) byte {
	st := adpcmSteps[s.index]
	diff := x - s.pred
	neg := diff >> 31 // −1 where negative, else 0
	a := (diff ^ neg) - neg
	b2 := ((st - 1 - a) >> 31) & 1 // a ≥ st
	a -= st & -b2
	b1 := ((st>>1 - 1 - a) >> 31) & 1
	a -= (st >> 1) & -b1
	b0 := ((st>>2 - 1 - a) >> 31) & 1
	return byte(b2<<2|b1<<1|b0) | byte(neg&8)
}

// toInt16 is a sample as the coder takes it: rounded half away from zero
// (as math.Round does), within int16.
func toInt16(x float32) int32 {
	v := float64(x) * 32768
	return min(max(int32(v+math.Copysign(0.5, v)), math.MinInt16), math.MaxInt16)
}

// adpcmEncoder codes an episode's samples as they stream, giving back the
// samples its code decodes to.
type adpcmEncoder struct {
	s     adpcmState
	n     int64                 // samples coded
	block [adpcmBlockBytes]byte // the block being coded
	// out, when set, takes each block as it is complete (the last at
	// close) and how many samples it codes.
	out func(block []byte, samples int)
}

// code codes x and writes to dec (as long as x) the samples the code
// decodes to.
func (e *adpcmEncoder) code(x, dec []float32) {
	dec = dec[:len(x)]
	s := e.s
	k := int(e.n % adpcmBlock)
	for i, v := range x {
		q := toInt16(v)
		if k == 0 {
			s.pred = q
			e.block[0], e.block[1], e.block[2], e.block[3] = byte(q), byte(q>>8), byte(s.index), 0
		} else {
			nb := s.nibble(q)
			q = s.step(nb)
			at := adpcmHead + (k-1)/2
			if k%2 == 1 {
				e.block[at] = nb
			} else {
				e.block[at] |= nb << 4
			}
		}
		dec[i] = float32(q) / 32768
		if k++; k == adpcmBlock {
			if e.out != nil {
				e.out(e.block[:], adpcmBlock)
			}
			k = 0
		}
	}
	e.s = s
	e.n += int64(len(x))
}

// close hands out the last, partial block.
func (e *adpcmEncoder) close() {
	if k := int(e.n % adpcmBlock); k != 0 && e.out != nil {
		e.out(e.block[:adpcmHead+k/2], k)
	}
}

// adpcmDecode decodes the blocks in b, which start at a block's start,
// into dst: as many samples as dst holds, all of them in b.
func adpcmDecode(dst []float32, b []byte) error {
	for len(dst) > 0 {
		n := min(len(dst), adpcmBlock)
		if len(b) < adpcmHead+n/2 {
			return fmt.Errorf("locate: a block of %d samples in %d bytes", n, len(b))
		}
		if b[2] >= byte(len(adpcmSteps)) || b[3] != 0 {
			return fmt.Errorf("locate: a block's header %x is none the coder writes", b[:4])
		}
		s := adpcmState{pred: int32(int16(binary.LittleEndian.Uint16(b))), index: int32(b[2])}
		dst[0] = float32(s.pred) / 32768
		for i := 1; i < n; i++ {
			c := b[adpcmHead+(i-1)/2]
			if i%2 == 0 {
				c >>= 4
			}
			dst[i] = float32(s.step(c&15)) / 32768
		}
		dst = dst[n:]
		b = b[min(len(b), adpcmBlockBytes):]
	}
	return nil
}
