package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mewkiz/flac"
)

// flacCase is audio synthesized as integers and the flac tool's options to
// encode it with, chosen so that every part of the format is met: fixed and
// LPC predictors up to order 32 and precision 15, constant and verbatim
// subframes, wasted bits, every stereo decorrelation, escaped and 5-bit Rice
// partitions, block sizes from 192 to 65,535, and the header's coded rates.
type flacCase struct {
	name     string
	channels int
	bps      int
	rate     int
	kind     string // "music", "silence", "noise", "wasted", "loud"
	args     []string
}

var flacCases = []flacCase{
	{"mono16 -5", 1, 16, 44100, "music", []string{"-5"}},
	{"stereo16 -8 mid/side", 2, 16, 44100, "music", []string{"-8"}},
	{"stereo16 independent", 2, 16, 44100, "music", []string{"-5", "--no-mid-side"}},
	{"stereo24 -8 48k", 2, 24, 48000, "music", []string{"-8"}},
	{"mono8 8k", 1, 8, 8000, "music", []string{"-5"}},
	{"6ch 16 96k", 6, 16, 96000, "music", []string{"-5"}},
	{"stereo16 lpc32 q15", 2, 16, 44100, "music", []string{"--lax", "-l", "32", "-q", "15", "-b", "16384", "-r", "15"}},
	{"mono16 -0 b192 11025", 1, 16, 11025, "music", []string{"-0", "-b", "192"}},
	{"mono16 b65535 37800", 1, 16, 37800, "music", []string{"--lax", "-b", "65535"}},
	{"stereo16 exhaustive", 2, 16, 22050, "music", []string{"-8", "-e", "-p", "-b", "4608"}},
	{"stereo16 wasted bits", 2, 16, 44100, "wasted", []string{"-5"}},
	{"mono16 silence", 1, 16, 44100, "silence", []string{"-5"}},
	{"stereo16 noise", 2, 16, 44100, "noise", []string{"-5"}},
	{"stereo16 loud", 2, 16, 44100, "loud", []string{"-8"}},
	{"mono24 noise lpc", 1, 24, 44100, "loud", []string{"-8", "-e"}},
	{"stereo32", 2, 32, 44100, "music", []string{"-5", "--no-mid-side"}},
}

// synth makes n frames of the case's audio, channel by channel.
func (c flacCase) synth(n int) [][]int32 {
	rng := rand.New(rand.NewPCG(uint64(c.channels), uint64(c.bps)))
	full := float64(int64(1)<<(c.bps-1) - 1)
	out := make([][]int32, c.channels)
	for ch := range out {
		x := make([]int32, n)
		for i := range x {
			t := float64(i) / float64(c.rate)
			var v float64
			switch c.kind {
			case "music":
				v = 0.3*math.Sin(2*math.Pi*220*t+float64(ch)) + 0.2*math.Sin(2*math.Pi*1375*t)*math.Sin(2*math.Pi*0.7*t) + 0.05*rng.NormFloat64()
			case "wasted":
				v = 0.4 * math.Sin(2*math.Pi*330*t+float64(ch))
			case "noise":
				v = rng.Float64()*2 - 1
			case "loud": // clipped square-ish waves and noise: large residuals, escapes
				v = math.Max(-1, math.Min(1, 3*math.Sin(2*math.Pi*97*t))) * (0.9 + 0.1*rng.Float64())
			}
			s := int32(math.Round(v * full))
			if c.kind == "wasted" {
				s &^= 7
			}
			x[i] = s
		}
		out[ch] = x
	}
	return out
}

// encode writes the samples as raw PCM and runs the flac tool on them.
func (c flacCase) encode(t testing.TB, x [][]int32) []byte {
	t.Helper()
	if _, err := exec.LookPath("flac"); err != nil {
		t.Fatalf("the flac tool is not installed (apt-get install flac): it encodes the audio the decoder is checked on")
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "in.raw")
	var buf bytes.Buffer
	width := (c.bps + 7) / 8
	var b [4]byte
	for i := range x[0] {
		for ch := range x {
			binary.LittleEndian.PutUint32(b[:], uint32(x[ch][i]))
			buf.Write(b[:width])
		}
	}
	if err := os.WriteFile(raw, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.flac")
	args := append([]string{"-s", "-f", "--force-raw-format", "--endian=little", "--sign=signed",
		fmt.Sprintf("--channels=%d", c.channels), fmt.Sprintf("--bps=%d", c.bps), fmt.Sprintf("--sample-rate=%d", c.rate),
		"-o", out}, c.args...)
	if msg, err := exec.Command("flac", append(args, raw)...).CombinedOutput(); err != nil {
		t.Fatalf("flac %v: %v\n%s", args, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeInts decodes FLAC with this package's decoder into integer samples
// per channel.
func decodeInts(data []byte) ([][]int32, *flacStream, error) {
	return decodeIntsUpTo(data, math.MaxInt)
}

// errEnough ends a decode at its bound of samples.
var errEnough = errors.New("enough samples")

// decodeIntsUpTo is decodeInts up to max samples per channel (a few bytes of
// constant frames are minutes of audio).
func decodeIntsUpTo(data []byte, max int) ([][]int32, *flacStream, error) {
	f, err := openFLAC(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	out := make([][]int32, f.channels)
	for {
		n, err := f.next()
		if err == io.EOF {
			return out, f, nil
		}
		if err != nil {
			return out, f, err
		}
		if len(out[0])+n > max {
			return out, f, errEnough
		}
		for c := range out {
			out[c] = append(out[c], f.ch[c][:n]...)
		}
	}
}

// decodeMewkiz decodes FLAC with github.com/mewkiz/flac, the reference.
func decodeMewkiz(data []byte, max int) (out [][]int32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("mewkiz/flac panicked: %v", p)
		}
	}()
	s, err := flac.New(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out = make([][]int32, s.Info.NChannels)
	for {
		fr, err := s.ParseNext()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(out[0])+len(fr.Subframes[0].Samples) > max {
			return out, errEnough
		}
		for c := range out {
			out[c] = append(out[c], fr.Subframes[c].Samples...)
		}
	}
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestFLACIsLossless: audio encoded by the flac tool in every form the
// format has decodes to exactly the samples encoded, as it does with
// github.com/mewkiz/flac.
func TestFLACIsLossless(t *testing.T) {
	for _, c := range flacCases {
		t.Run(c.name, func(t *testing.T) {
			n := c.rate*3/2 + 123 // a short last block
			want := c.synth(n)
			data := c.encode(t, want)
			got, f, err := decodeInts(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if f.rate != c.rate || f.channels != c.channels || f.bps != c.bps {
				t.Fatalf("STREAMINFO %d Hz %d ch %d bits, encoded %d Hz %d ch %d bits", f.rate, f.channels, f.bps, c.rate, c.channels, c.bps)
			}
			ref, err := decodeMewkiz(data, math.MaxInt)
			for ch := range want {
				if i := firstDiff(got[ch], want[ch]); i >= 0 {
					t.Fatalf("channel %d: %d samples decoded, %d encoded; first difference at %d", ch, len(got[ch]), len(want[ch]), i)
				}
				if err == nil {
					if i := firstDiff(got[ch], ref[ch]); i >= 0 {
						t.Fatalf("channel %d differs from mewkiz/flac at %d", ch, i)
					}
				}
			}
			t.Logf("%d frames, %d bytes for %d samples × %d channels (mewkiz/flac: %v)", f.frame, len(data), n, c.channels, err)
		})
	}
}

// TestFLACStream: the Stream of a FLAC file is its downmix to mono in
// [-1, 1], read in any buffer size.
func TestFLACStream(t *testing.T) {
	c := flacCases[1]
	want := c.synth(20000)
	s, err := Open(bytes.NewReader(c.encode(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	if s.SampleRate() != c.rate {
		t.Fatalf("rate %d", s.SampleRate())
	}
	var got []float32
	buf := make([]float32, 777)
	for {
		n, err := s.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want[0]) {
		t.Fatalf("%d samples, want %d", len(got), len(want[0]))
	}
	for i := range got {
		w := float32(int64(want[0][i])+int64(want[1][i])) / 2 / 32768
		if got[i] != w {
			t.Fatalf("sample %d: %v, want %v", i, got[i], w)
		}
	}
}

// TestFLACCorruption: a flipped bit anywhere in a frame or a file cut
// anywhere fails with a corrupt-audio error, never a wrong sample or a
// panic; a clean file's end is io.EOF.
func TestFLACCorruption(t *testing.T) {
	c := flacCases[1]
	want := c.synth(30000)
	data := c.encode(t, want)
	// The first frame starts after the metadata.
	f, err := openFLAC(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	audioStart := int(f.br.pos >> 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		bad := bytes.Clone(data)
		i := audioStart + rng.IntN(len(bad)-audioStart)
		bad[i] ^= 1 << rng.IntN(8)
		got, _, err := decodeInts(bad)
		if err == nil {
			t.Fatalf("bit flipped at byte %d: decoded without error", i)
		}
		if !errors.Is(err, errFLACCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("bit flipped at byte %d: %v", i, err)
		}
		for ch := range got { // what came before the bad frame is right
			if j := firstDiff(got[ch], want[ch][:len(got[ch])]); j >= 0 {
				t.Fatalf("bit flipped at byte %d: sample %d wrong before the error", i, j)
			}
		}
	}
	for _, cut := range []int{audioStart + 1, audioStart + 17, len(data) / 2, len(data) - 1} {
		if _, _, err := decodeInts(data[:cut]); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errFLACCorrupt) {
			t.Fatalf("cut at %d of %d: %v", cut, len(data), err)
		}
	}
	if _, err := ReadAll(mustOpen(t, data[:len(data)-3])); !IsPermanent(err) {
		t.Fatalf("truncated FLAC through Open: %v, want a permanent error", err)
	}
}

// TestFLACMetadataIsBounded: a stream of metadata blocks without end fails
// at the bound, naming it, instead of being read for ever.
func TestFLACMetadataIsBounded(t *testing.T) {
	c := flacCases[0]
	data := c.encode(t, c.synth(1000))
	// STREAMINFO without its last-block flag, then padding blocks of
	// 16 MiB - 1 of zeros, each header 0x01 (padding, not last).
	head := bytes.Clone(data[:4+4+34])
	head[4] &^= 0x80
	block := []byte{0x01, 0xff, 0xff, 0xff}
	r := io.MultiReader(bytes.NewReader(head), &padding{block: block})
	_, err := OpenLimited(r, DefaultLimits)
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != "FLAC metadata" {
		t.Fatalf("got %v, want the FLAC metadata bound", err)
	}
	t.Log(err)
}

// padding is padding metadata blocks without end: a header, then its
// 16 MiB - 1 zero bytes.
type padding struct {
	block []byte
	pos   int // in the current block, header included
}

func (p *padding) Read(b []byte) (int, error) {
	const size = 4 + 1<<24 - 1
	for i := range b {
		if p.pos < len(p.block) {
			b[i] = p.block[p.pos]
		} else {
			b[i] = 0
		}
		p.pos = (p.pos + 1) % size
	}
	return len(b), nil
}

func mustOpen(t *testing.T, data []byte) Stream {
	t.Helper()
	s, err := Open(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzFLAC: no input makes the decoder panic or read without bound, and
// wherever github.com/mewkiz/flac decodes a whole file, this decoder
// decodes the same samples.
func FuzzFLAC(f *testing.F) {
	for _, i := range []int{0, 1, 7, 10, 11, 12, 13} {
		c := flacCases[i]
		c.args = append(c.args, "-b", "576")
		f.Add(c.encode(f, c.synth(1500)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 1 << 20
		got, _, err := decodeIntsUpTo(data, max)
		if err != nil {
			return
		}
		ref, rerr := decodeMewkiz(data, max)
		if rerr != nil {
			return
		}
		for ch := range ref {
			if i := firstDiff(got[ch], ref[ch]); i >= 0 {
				t.Fatalf("channel %d differs from mewkiz/flac at sample %d", ch, i)
			}
		}
	})
}

// BenchmarkFLACDecode decodes a minute of 44.1 kHz mono 16-bit FLAC (the
// flac tool's default -5) to mono float samples with this package's decoder
// and with github.com/mewkiz/flac, which it replaced, alternately in one
// run: realtime multiples of each and their ratio.
//
//	go test -run '^$' -bench FLACDecode -benchtime 10x ./audio/
func BenchmarkFLACDecode(b *testing.B) {
	c := flacCase{"bench", 1, 16, 44100, "music", []string{"-5"}}
	data := c.encode(b, c.synth(60*c.rate))
	seconds := 60.0
	buf := make([]float32, 1<<16)
	var ours, ref time.Duration
	for range b.N {
		t0 := time.Now()
		s, err := openFLAC(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := s.Read(buf); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		ours += time.Since(t0)
		t0 = time.Now()
		m, err := flac.New(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		for {
			fr, err := m.ParseNext()
			if err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			for i, v := range fr.Subframes[0].Samples { // as the replaced code converted
				buf[i%len(buf)] = float32(v) / 32768
			}
		}
		ref += time.Since(t0)
	}
	b.ReportMetric(seconds*float64(b.N)/ours.Seconds(), "×realtime")
	b.ReportMetric(seconds*float64(b.N)/ref.Seconds(), "×realtime-mewkiz")
	b.ReportMetric(ref.Seconds()/ours.Seconds(), "speedup")
}
