package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// wavStream reads PCM (8, 16, 24, 32-bit integer) or 32/64-bit float WAV.
type wavStream struct {
	r        io.Reader
	rate     int
	channels int
	bits     int
	float    bool
	left     int64 // bytes of sample data left
	raw      []byte
}

func openWAV(r io.Reader) (*wavStream, error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return nil, err
	}
	w := &wavStream{r: r}
	haveFmt := false
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, fmt.Errorf("no data chunk: %w", err)
		}
		id, size := string(hdr[:4]), int64(binary.LittleEndian.Uint32(hdr[4:]))
		switch id {
		case "fmt ":
			if size < 16 {
				return nil, errors.New("fmt chunk too short")
			}
			if size > maxFmtChunk {
				return nil, fmt.Errorf("fmt chunk of %d bytes is beyond the limit of %d", size, maxFmtChunk)
			}
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, err
			}
			format := binary.LittleEndian.Uint16(b[0:])
			w.channels = int(binary.LittleEndian.Uint16(b[2:]))
			w.rate = int(binary.LittleEndian.Uint32(b[4:]))
			w.bits = int(binary.LittleEndian.Uint16(b[14:]))
			if format == 0xFFFE && size >= 26 {
				format = binary.LittleEndian.Uint16(b[24:]) // WAVE_FORMAT_EXTENSIBLE sub-format
			}
			switch {
			case format == 1 && (w.bits == 8 || w.bits == 16 || w.bits == 24 || w.bits == 32):
			case format == 3 && (w.bits == 32 || w.bits == 64):
				w.float = true
			default:
				return nil, fmt.Errorf("unsupported format %d with %d bits", format, w.bits)
			}
			if err := DefaultLimits.check(w.channels, w.rate); err != nil {
				return nil, err
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, errors.New("data chunk before fmt chunk")
			}
			w.left = size
			if size == 0 || size == 0xFFFFFFFF {
				w.left = math.MaxInt64 // streamed WAV: to the end
			}
			return w, nil
		default:
			if _, err := io.CopyN(io.Discard, r, size+size%2); err != nil {
				return nil, err
			}
		}
	}
}

func (w *wavStream) SampleRate() int { return w.rate }

func (w *wavStream) Read(buf []float32) (int, error) {
	if w.left <= 0 {
		return 0, io.EOF
	}
	frame := w.channels * w.bits / 8
	want := int64(len(buf) * frame)
	if want > w.left {
		want = w.left - w.left%int64(frame)
	}
	if want == 0 {
		return 0, io.EOF
	}
	if cap(w.raw) < int(want) {
		w.raw = make([]byte, want)
	}
	n, err := io.ReadFull(w.r, w.raw[:want])
	n -= n % frame
	w.left -= int64(n)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		w.left, err = 0, nil // a truncated file ends where it ends
	}
	frames := n / frame
	b := w.raw[:n]
	ch := w.channels
	inv := 1 / float32(ch)
	for i := range frames {
		var sum float32
		for c := range ch {
			o := (i*ch + c) * w.bits / 8
			switch {
			case w.float && w.bits == 32:
				sum += math.Float32frombits(binary.LittleEndian.Uint32(b[o:]))
			case w.float:
				sum += float32(math.Float64frombits(binary.LittleEndian.Uint64(b[o:])))
			case w.bits == 16:
				sum += float32(int16(binary.LittleEndian.Uint16(b[o:]))) / 32768
			case w.bits == 24:
				sum += float32(int32(uint32(b[o])<<8|uint32(b[o+1])<<16|uint32(b[o+2])<<24)>>8) / 8388608
			case w.bits == 32:
				sum += float32(int32(binary.LittleEndian.Uint32(b[o:]))) / 2147483648
			default: // 8-bit is unsigned
				sum += (float32(b[o]) - 128) / 128
			}
		}
		buf[i] = sum * inv
	}
	if frames == 0 && err == nil {
		return 0, io.EOF
	}
	return frames, err
}
