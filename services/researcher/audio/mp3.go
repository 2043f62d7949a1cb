package audio

import (
	"bufio"
	"encoding/binary"
	"io"

	"github.com/hajimehoshi/go-mp3"
)

// decoderDelay is the MP3 decoder's own delay (the synthesis filterbank),
// which LAME's encoder-delay field does not include.
const decoderDelay = 529

// mp3Stream decodes with go-mp3 and trims what LAME's header says is not
// audio: the info frame (decoded as a frame of silence), the encoder and
// decoder delay at the start, and the padding at the end. Without this every
// offset is late by the same ~50 ms.
type mp3Stream struct {
	d       *mp3.Decoder
	raw     []byte
	skip    int       // samples still to drop at the start
	hold    int       // samples to hold back from the end (padding)
	tail    []float32 // held-back samples
	eof     bool
	pending []float32
}

// Gapless is what a LAME (or Xing "Info") header says about an MP3.
type Gapless struct {
	// InfoFrame is set when the first frame is a Xing/Info header frame.
	InfoFrame bool
	// FrameSamples is the samples per frame (1152, or 576 for MPEG-2/2.5).
	FrameSamples int
	// EncoderDelay and Padding are LAME's fields, in samples.
	EncoderDelay, Padding int
	// HasLAME is set when the LAME tag (with delay and padding) is present.
	HasLAME bool
}

// ReadGapless reads the Xing/Info and LAME headers at the start of an MP3
// (after any ID3v2 tag) from br without consuming it.
func ReadGapless(br *bufio.Reader) Gapless {
	var g Gapless
	head, _ := br.Peek(10)
	skip := 0
	if len(head) == 10 && string(head[:3]) == "ID3" {
		skip = 10 + int(head[6]&0x7f)<<21 | int(head[7]&0x7f)<<14 | int(head[8]&0x7f)<<7 | int(head[9]&0x7f)
		if head[5]&0x10 != 0 {
			skip += 10 // footer
		}
	}
	b, _ := br.Peek(skip + 4096)
	if len(b) <= skip {
		return g
	}
	b = b[skip:]
	// The first frame header (skipping any junk before it).
	i := 0
	for ; i+4 <= len(b); i++ {
		if b[i] == 0xFF && b[i+1]&0xE0 == 0xE0 && b[i+1]&0x06 != 0 && b[i+2]&0xF0 != 0xF0 && b[i+2]&0x0C != 0x0C {
			break
		}
	}
	if i+4 > len(b) {
		return g
	}
	h := binary.BigEndian.Uint32(b[i:])
	version := (h >> 19) & 3 // 3 = MPEG-1
	mono := (h>>6)&3 == 3
	side := 0
	switch {
	case version == 3 && mono:
		side = 17
	case version == 3:
		side = 32
	case mono:
		side = 9
	default:
		side = 17
	}
	g.FrameSamples = 1152
	if version != 3 {
		g.FrameSamples = 576
	}
	x := i + 4 + side
	if x+8 > len(b) || (string(b[x:x+4]) != "Xing" && string(b[x:x+4]) != "Info") {
		return g
	}
	g.InfoFrame = true
	flags := binary.BigEndian.Uint32(b[x+4:])
	p := x + 8
	if flags&1 != 0 {
		p += 4 // frames
	}
	if flags&2 != 0 {
		p += 4 // bytes
	}
	if flags&4 != 0 {
		p += 100 // TOC
	}
	if flags&8 != 0 {
		p += 4 // quality
	}
	if p+24 <= len(b) && (string(b[p:p+4]) == "LAME" || string(b[p:p+4]) == "Lavf" || string(b[p:p+4]) == "Lavc") {
		d := b[p+21:]
		g.EncoderDelay = int(d[0])<<4 | int(d[1])>>4
		g.Padding = int(d[1]&0x0F)<<8 | int(d[2])
		g.HasLAME = true
	}
	return g
}

func openMP3(br *bufio.Reader) (Stream, error) {
	g := ReadGapless(br)
	d, err := mp3.NewDecoder(br)
	if err != nil {
		return nil, err
	}
	m := &mp3Stream{d: d}
	if g.InfoFrame {
		m.skip = g.FrameSamples // go-mp3 decodes the info frame as silence
	}
	if g.HasLAME {
		m.skip += g.EncoderDelay + decoderDelay
		m.hold = max(g.Padding-decoderDelay, 0)
	}
	return m, nil
}

func (m *mp3Stream) SampleRate() int { return m.d.SampleRate() }

func (m *mp3Stream) Read(buf []float32) (int, error) {
	for len(m.pending) == 0 {
		if m.eof {
			return 0, io.EOF
		}
		if cap(m.raw) < 16<<10 {
			m.raw = make([]byte, 16<<10)
		}
		n, err := io.ReadFull(m.d, m.raw[:16<<10])
		n -= n % 4
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			m.eof, err = true, nil
		}
		if err != nil {
			return 0, err
		}
		samples := make([]float32, 0, n/4+len(m.tail))
		samples = append(samples, m.tail...)
		for i := 0; i < n; i += 4 {
			l := int16(binary.LittleEndian.Uint16(m.raw[i:]))
			r := int16(binary.LittleEndian.Uint16(m.raw[i+2:]))
			samples = append(samples, (float32(l)+float32(r))/65536)
		}
		if m.skip > 0 {
			k := min(m.skip, len(samples))
			samples, m.skip = samples[k:], m.skip-k
		}
		// Hold back the padding's worth until the end is known.
		if m.eof {
			samples = samples[:max(len(samples)-m.hold, 0)]
			m.tail = nil
		} else if len(samples) > m.hold {
			m.tail = append([]float32(nil), samples[len(samples)-m.hold:]...)
			samples = samples[:len(samples)-m.hold]
		} else {
			m.tail, samples = samples, nil
		}
		m.pending = samples
	}
	n := copy(buf, m.pending)
	m.pending = m.pending[n:]
	return n, nil
}
