package audio_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mewkiz/flac"
	"github.com/mewkiz/flac/frame"
	"github.com/mewkiz/flac/meta"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// oggCRC is the Ogg page checksum (CRC-32, polynomial 0x04c11db7, not
// reflected).
func oggCRC(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// emptyOggPage is the 27-byte Ogg page with no segments, with a
// valid checksum.
func emptyOggPage() []byte {
	b := make([]byte, 27)
	copy(b, "OggS")
	b[5] = 2 // beginning of stream
	binary.LittleEndian.PutUint32(b[14:], 1)
	binary.LittleEndian.PutUint32(b[22:], oggCRC(b))
	return b
}

// constantFLAC is FLAC of frames of 65,535 constant samples: a few bytes a
// frame for 1.5 s of audio each.
func constantFLAC(t testing.TB, frames int) []byte {
	t.Helper()
	var buf bytes.Buffer
	info := &meta.StreamInfo{BlockSizeMin: 65535, BlockSizeMax: 65535, SampleRate: 44100, NChannels: 1, BitsPerSample: 16}
	enc, err := flac.NewEncoder(&buf, info)
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]int32, 65535)
	for i := range samples {
		samples[i] = 1000
	}
	for i := range frames {
		f := &frame.Frame{Header: frame.Header{HasFixedBlockSize: true, BlockSize: 65535, SampleRate: 44100,
			Channels: frame.ChannelsMono, BitsPerSample: 16, Num: uint64(i)},
			Subframes: []*frame.Subframe{{SubHeader: frame.SubHeader{Pred: frame.PredConstant}, Samples: samples, NSamples: 65535}}}
		if err := enc.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll decodes b whole, as a clip is read.
func readAll(b []byte, lim audio.Limits) (n int, err error) {
	s, err := audio.OpenLimited(bytes.NewReader(b), lim)
	if err != nil {
		return 0, err
	}
	x, err := audio.ReadAll(s)
	return len(x), err
}

func TestHostileAudioFailsWithinBounds(t *testing.T) {
	clip := audio.DefaultLimits
	clip.MaxDuration = time.Minute
	flacBomb := constantFLAC(t, 1400) // ~35 minutes of audio
	t.Logf("constant FLAC: %d bytes", len(flacBomb))
	cases := []struct {
		name      string
		in        []byte
		lim       audio.Limits
		want      string // in the error
		permanent bool
	}{
		{"Ogg page with no segments", emptyOggPage(), clip, "", true},
		{"WAV rate near 4 GHz", locatetest.WAVHeader(1, 4294967291, 16, 0), clip, "sample rate 4294967291 Hz is beyond the limit", true},
		{"WAV of 65535 channels", append(locatetest.WAVHeader(65535, 8000, 16, 16), make([]byte, 16)...), clip, "channels 65535 is beyond the limit", true},
		{"WAV with a 4 GB fmt chunk", append(append([]byte("RIFF\x00\x00\x00\x00WAVEfmt "), 0xff, 0xff, 0xff, 0xff), make([]byte, 16)...), clip, "fmt chunk of 4294967295 bytes is beyond the limit", true},
		{"FLAC of constant subframes past the clip bound", flacBomb, clip, "duration", true},
		{"truncated MP3 frame", []byte{0xff, 0xfb, 0x90, 0x64, 0, 0, 0}, clip, "", true},
		{"unknown format", []byte("hello, world"), clip, "not WAV, FLAC, MP3 or Ogg Vorbis", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			mem := testenv.PeakHeap(func() { _, err = readAll(c.in, c.lim) })
			if err == nil {
				t.Fatal("accepted")
			}
			t.Logf("%s: %v (peak heap %d KiB)", c.name, err, mem>>10)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q lacks %q", err, c.want)
			}
			if audio.IsPermanent(err) != c.permanent {
				t.Errorf("permanent = %v, want %v", audio.IsPermanent(err), c.permanent)
			}
			if mem > 64<<20 {
				t.Errorf("peak heap %d MiB", mem>>20)
			}
		})
	}
}

// A read error of the source is not the file's fault: it stays transient.
func TestSourceErrorIsNotPermanent(t *testing.T) {
	b := append(locatetest.WAVHeader(1, 8000, 16, 8000), make([]byte, 100)...)
	r := io.MultiReader(bytes.NewReader(b), errReader{})
	s, err := audio.Open(r)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 8000)
	for err == nil {
		_, err = s.Read(buf)
	}
	if err == io.EOF || audio.IsPermanent(err) {
		t.Fatalf("source failure read as %v (permanent %v)", err, audio.IsPermanent(err))
	}
}

// A read error before the format is known (the store's connection reset on
// the first bytes) is no verdict on the format: it used to read as "not
// WAV, FLAC, MP3 or Ogg Vorbis" and park the clip for good (the S3 soak
// found it, right after the stand-in came back).
func TestSourceErrorBeforeTheHeaderIsNotPermanent(t *testing.T) {
	for _, n := range []int{0, 4, 11} {
		b := locatetest.WAVHeader(1, 8000, 16, 8000)[:n]
		_, err := audio.Open(io.MultiReader(bytes.NewReader(b), errReader{}))
		if err == nil || audio.IsPermanent(err) || !strings.Contains(err.Error(), "connection reset") {
			t.Errorf("%d bytes then a read error: %v (permanent %v), want the read error, not permanent", n, err, audio.IsPermanent(err))
		}
	}
	// A file that is only short is still of no known format.
	if _, err := audio.Open(bytes.NewReader([]byte("RIF"))); !audio.IsPermanent(err) {
		t.Errorf("a 3-byte file: %v, want permanent", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// FuzzOpen: no input makes a decoder panic, hang or allocate past the
// bounds; seeds are the test files of every format and the hostile inputs.
func FuzzOpen(f *testing.F) {
	for _, name := range []string{"testdata/tone.ogg"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add(emptyOggPage())
	f.Add(append(locatetest.WAVHeader(2, 44100, 16, 400), make([]byte, 400)...))
	f.Add(locatetest.WAVHeader(65535, 8000, 16, 0))
	f.Add(constantFLAC(f, 2))
	f.Add([]byte{0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0, 0, 0, 0, 0})
	lim := audio.DefaultLimits
	lim.MaxDuration = time.Minute
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readAll(b, lim)
	})
}
