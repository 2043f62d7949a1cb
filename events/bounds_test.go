package events_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/archivist/archivist/events"
)

// allocated reports the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func nested(depth int) []byte {
	return append(bytes.Repeat([]byte{0x91}, depth), 0xc0)
}

func TestHostileMsgpackIsRefusedBeforeAllocating(t *testing.T) {
	cases := []struct {
		name  string
		in    []byte
		bound string // the LimitError's bound, or "" for a format error
	}{
		// The 14 bytes: {"same_as": array32 of 2^32-1}.
		{"array32 length bomb", append(append([]byte{0x81, 0xa7}, "same_as"...), 0xdd, 0xff, 0xff, 0xff, 0xff), "msgpack array or map length"},
		{"map32 length bomb", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "msgpack array or map length"},
		{"array16 longer than the bytes left", []byte{0xdc, 0x10, 0x00, 0xc0}, ""},
		{"str32 longer than the bytes left", []byte{0x81, 0xa2, 'i', 'd', 0xdb, 0x7f, 0xff, 0xff, 0xff}, ""},
		{"bin32 longer than the bytes left", []byte{0xc6, 0xff, 0xff, 0xff, 0xff, 0}, ""},
		{"ext32 longer than the bytes left", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 1}, ""},
		{"1 MB of nested arrays", nested(1 << 20)[:1<<20], "msgpack nesting depth"},
		{"nesting past the depth", nested(events.DefaultLimits.MaxDepth + 1), "msgpack nesting depth"},
		{"8 MB of nested arrays", nested(8 << 20), "msgpack message bytes"},
		{"never-used byte", []byte{0xc1}, ""},
		{"trailing bytes", []byte{0xc0, 0xc0}, ""},
		{"empty", nil, ""},
		{"truncated map", []byte{0x82, 0xa1, 'a'}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = events.Unmarshal(c.in) })
			if err == nil {
				t.Fatal("accepted")
			}
			if n > 64<<10 {
				t.Errorf("allocated %d bytes refusing %d bytes of input", n, len(c.in))
			}
			var le *events.LimitError
			if c.bound != "" {
				if !errors.As(err, &le) || le.Bound != c.bound {
					t.Fatalf("error %v, want a LimitError on %q", err, c.bound)
				}
				if !strings.Contains(err.Error(), c.bound) {
					t.Errorf("error %q does not name the bound", err)
				}
			} else if errors.As(err, &le) {
				t.Fatalf("error %v is a limit, want a format error", err)
			}
		})
	}
}

func TestCheckMsgpackAcceptsEveryExample(t *testing.T) {
	for _, k := range events.Kinds() {
		ev := k.New()
		env, err := events.New("test", ev)
		if err != nil {
			t.Fatal(err)
		}
		b, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := events.CheckMsgpack(b, events.DefaultLimits); err != nil {
			t.Errorf("%s: %v", k.Type, err)
		}
		if _, err := events.Unmarshal(b); err != nil {
			t.Errorf("%s: %v", k.Type, err)
		}
	}
	// Every wire form: ints of each width, floats, ext (time), bin, map16.
	good := [][]byte{
		{0xcc, 1}, {0xcd, 0, 1}, {0xce, 0, 0, 0, 1}, {0xcf, 0, 0, 0, 0, 0, 0, 0, 1},
		{0xd0, 1}, {0xd1, 0, 1}, {0xd2, 0, 0, 0, 1}, {0xd3, 0, 0, 0, 0, 0, 0, 0, 1},
		{0xca, 0, 0, 0, 0}, {0xcb, 0, 0, 0, 0, 0, 0, 0, 0},
		{0xd6, 0xff, 0, 0, 0, 1}, {0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, {0xc7, 12, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		{0xc4, 2, 'a', 'b'}, {0xd9, 1, 'a'}, {0xde, 0, 1, 0xa1, 'a', 0x90}, {0xdc, 0, 2, 0x80, 0xe0},
		{0x92, 0x91, 0x90, 0x81, 0xa0, 0xc3},
	}
	for _, b := range good {
		if err := events.CheckMsgpack(b, events.DefaultLimits); err != nil {
			t.Errorf("% x: %v", b, err)
		}
	}
}

func TestUnmarshalMsgpackStrict(t *testing.T) {
	var v struct {
		A int `msgpack:"a"`
	}
	if err := events.UnmarshalMsgpack([]byte{0x81, 0xa1, 'b', 1}, &v, events.DefaultLimits, true); err == nil {
		t.Fatal("unknown field accepted in strict mode")
	}
	if err := events.UnmarshalMsgpack([]byte{0x81, 0xa1, 'a', 7}, &v, events.DefaultLimits, true); err != nil || v.A != 7 {
		t.Fatalf("got %v, %d", err, v.A)
	}
}

// FuzzEnvelope: no input makes the envelope or any payload decoder panic or
// allocate past the bounds.
func FuzzEnvelope(f *testing.F) {
	for _, k := range events.Kinds() {
		env, _ := events.New("seed", k.New())
		b, _ := env.Marshal()
		f.Add(b)
	}
	f.Add(append(append([]byte{0x81, 0xa7}, "same_as"...), 0xdd, 0xff, 0xff, 0xff, 0xff))
	f.Add(nested(40))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := events.Unmarshal(b)
		if err != nil {
			return
		}
		for _, k := range events.Kinds() {
			v := k.New()
			_ = events.UnmarshalMsgpack(env.Payload, v, events.DefaultLimits, false)
			_ = v.Validate()
		}
	})
}

// BenchmarkUnmarshalChecked: the envelope decode of every consumed event,
// with the bounds scan (the scan alone is BenchmarkCheckMsgpack).
func BenchmarkUnmarshalChecked(b *testing.B) {
	env, _ := events.New("bench", &events.EpisodeUpserted{ID: "ep-0001", Title: "Episode", Media: events.Media{Key: "audio/ep-0001.mp3"}})
	raw, _ := env.Marshal()
	b.Run("check", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if err := events.CheckMsgpack(raw, events.DefaultLimits); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := events.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFailureTextIsStorable: a reason with NUL bytes, invalid UTF-8 and
// more than MaxFailureBytes comes out storable and within the bound, cut at
// a rune boundary.
func TestFailureTextIsStorable(t *testing.T) {
	in := "a\x00b\xff" + strings.Repeat("é", events.MaxFailureBytes)
	out := events.FailureText(in)
	if len(out) > events.MaxFailureBytes || strings.ContainsRune(out, 0) || !utf8.ValidString(out) || !strings.HasPrefix(out, "ab") || !strings.HasSuffix(out, "...") {
		t.Errorf("FailureText: %d bytes, %q...", len(out), out[:10])
	}
	if got := events.FailureText("short"); got != "short" {
		t.Errorf("a short reason changed: %q", got)
	}
}

// TestRecordsAreBoundedPerSource (N27): a record's free text is bounded,
// the largest valid record fits in a CURATION message, and CURATION keeps
// a bounded number of each source's messages (a flood pushes out only the
// flooder's own).
func TestRecordsAreBoundedPerSource(t *testing.T) {
	at := time.Now()
	big := events.EpisodeUpserted{ID: strings.Repeat("i", 200), Source: strings.Repeat("s", 64), Title: strings.Repeat("t", events.MaxTitleBytes),
		Media: events.Media{Key: strings.Repeat("k", events.MaxMediaKeyBytes), SHA256: strings.Repeat("0", 64)}, DurationMS: 1, Priority: 1,
		InitialCuratedAt: at, LatestCuratedAt: at}
	for i := range events.MaxSameAs {
		big.SameAs = append(big.SameAs, events.Ref{Source: strings.Repeat("s", 64), ID: fmt.Sprintf("%0200d", i)})
	}
	if err := big.Validate(); err != nil {
		t.Fatalf("the largest valid record: %v", err)
	}
	env, err := events.New(big.Source, &big)
	if err != nil {
		t.Fatal(err)
	}
	b, err := msgpack.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > events.MaxCurationMessage {
		t.Errorf("the largest valid record is %d bytes, more than a CURATION message's %d", len(b), events.MaxCurationMessage)
	}
	for _, c := range []struct {
		field string
		edit  func(*events.EpisodeUpserted)
	}{
		{"title", func(e *events.EpisodeUpserted) { e.Title += "t" }},
		{"media.key", func(e *events.EpisodeUpserted) { e.Media.Key += "k" }},
		{"media.key", func(e *events.EpisodeUpserted) { e.Media.Key = "audio/a\nb.mp3" }},
	} {
		e := big
		c.edit(&e)
		var fe *events.FieldError
		if err := e.Validate(); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("a record past the %s bound: %v", c.field, err)
		}
	}
	for _, s := range events.Streams(1) {
		if s.Name == events.StreamCuration && (s.MaxMsgsPerSubject <= 0 || s.MaxMsgSize != events.MaxCurationMessage) {
			t.Errorf("CURATION keeps %d messages a subject, each up to %d bytes: want both bounded", s.MaxMsgsPerSubject, s.MaxMsgSize)
		}
		// The bound is on events waiting, and a full source is refused:
		// nothing not yet stored is pushed out.
		if s.Name == events.StreamCuration && (s.Retention != jetstream.InterestPolicy || s.Discard != jetstream.DiscardNew || !s.DiscardNewPerSubject) {
			t.Errorf("CURATION retention %v, discard %v (per subject %v): want interest, new, per subject", s.Retention, s.Discard, s.DiscardNewPerSubject)
		}
	}
}
