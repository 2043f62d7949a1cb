package locate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// MarshalBinary encodes the print (its Name aside: a print belongs to the
// audio, which many clips may share), little-endian: the number of Low
// and of High variants (uint32 each), then each variant: its speed
// (float64), landmarks, samples (uint32 count, float32 each), hashes
// (uint32 count, uint32 hash and int32 frame each), envelopes (uint32
// count, float32 each). The samples of the low band's speed variants are
// left out, their count written with its top bit set (omitted): they are
// the clip's own played at their speed, made again when needed
// (VariantPrint), and were most of a print's bytes: an 8 s clip's print
// is 0.37 MB where it was 0.88 at the default speeds, 0.62 where it was
// 3.2 at ten variants. A print written before keeps them, and decodes as
// it did.
func (c *ClipPrint) MarshalBinary() ([]byte, error) {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.Low)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.High)))
	for i, v := range append(c.Low[:len(c.Low):len(c.Low)], c.High...) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Speed))
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Landmarks))
		if i > 0 && i < len(c.Low) {
			b = binary.LittleEndian.AppendUint32(b, uint32(v.Length)|omitted)
		} else {
			b = appendFloats(b, v.Samples)
		}
		b = appendHashes(b, v.Hashes)
		b = appendFloats(b, v.Env)
	}
	return b, nil
}

// appendHashes appends a count of hashes and each: its uint32 hash and
// int32 frame.
func appendHashes(b []byte, hs []Hash) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hs)))
	for _, h := range hs {
		b = binary.LittleEndian.AppendUint32(b, h.H)
		b = binary.LittleEndian.AppendUint32(b, uint32(h.T))
	}
	return b
}

// omitted marks a count of samples left out of a print.
const omitted = 1 << 31

func appendFloats(b []byte, x []float32) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// errClipPrint is a clip print whose bytes do not decode.
var errClipPrint = errors.New("locate: not a clip print")

// UnmarshalBinary decodes what MarshalBinary made, checking every length
// against the bytes there are and every hash against what a
// fingerprinter makes.
func (c *ClipPrint) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	nLow, nHigh := d.u32(), d.u32()
	if nLow > 64 || nHigh > 64 {
		return fmt.Errorf("%w: %d and %d variants", errClipPrint, nLow, nHigh)
	}
	vs := make([]VariantPrint, nLow+nHigh)
	for i := range vs {
		v := &vs[i]
		v.Speed = math.Float64frombits(d.u64())
		v.Landmarks = int(d.u32())
		if n := d.peek(); n&omitted != 0 {
			d.u32()
			if i == 0 || i >= int(nLow) || n == omitted {
				return fmt.Errorf("%w: variant %d: %d samples left out", errClipPrint, i, n&^omitted)
			}
			v.Length = int(n &^ omitted)
		} else {
			v.Samples = d.floats()
			v.Length = len(v.Samples)
		}
		n := d.count(8)
		hb := d.take(8 * n)
		v.Hashes = make([]Hash, n)
		for j := range v.Hashes {
			v.Hashes[j] = Hash{H: binary.LittleEndian.Uint32(hb[8*j:]), T: int32(binary.LittleEndian.Uint32(hb[8*j+4:]))}
			if h := v.Hashes[j]; h.H >= 1<<HashBits || h.T < 0 || h.T > 1<<16 {
				return fmt.Errorf("%w: hash %#x at frame %d", errClipPrint, h.H, h.T)
			}
		}
		v.Env = d.floats()
		if !(v.Speed > 0.5 && v.Speed < 2) || v.Landmarks > len(v.Hashes) {
			return fmt.Errorf("%w: variant %d: speed %g, %d landmarks of %d hashes", errClipPrint, i, v.Speed, v.Landmarks, len(v.Hashes))
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes left over, %v", errClipPrint, len(d.b), d.err)
	}
	c.Low, c.High = vs[:nLow], vs[nLow:]
	if nHigh == 0 {
		c.High = nil
	}
	return nil
}

// decoder reads little-endian values, failing (once) past the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errClipPrint
		return make([]byte, n)
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }

// peek is the next uint32, not read (0 past the end, which the next read
// then finds).
func (d *decoder) peek() uint32 {
	if d.err != nil || len(d.b) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(d.b)
}

func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }

// count reads a count of items of size bytes each, at most what is left.
func (d *decoder) count(size int) int {
	n := int(d.u32())
	if d.err != nil || n > len(d.b)/size {
		d.err = errClipPrint
		return 0
	}
	return n
}

// floats reads a count and as many float32s, in one take (as the hashes
// are read): a take a value wrote the decoder's slice (through a write
// barrier while the collector runs) once a value, 7 % of a benchmark
// replaying an episode's print with 400 clips.
func (d *decoder) floats() []float32 {
	n := d.count(4)
	b := d.take(4 * n)
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}
