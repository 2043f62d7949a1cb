package events

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Limits bounds what a msgpack decoder of this package accepts. Every
// message is checked against them by a scan that allocates nothing before
// the msgpack library decodes it: vmihailenco/msgpack v5.4.1 allocates an
// array's declared length before reading an element (its allocation limit is
// never applied to slices, upstream issue #401) and skips nested values by
// recursion, so a 14-byte body could ask for 137 GB and 8 MB of nested
// arrays could overflow the stack.
type Limits struct {
	// MaxBytes is the largest message.
	MaxBytes int
	// MaxDepth is the deepest nesting of arrays and maps (the envelope is 1).
	MaxDepth int
	// MaxCount is the most elements of one array or entries of one map.
	MaxCount int
}

// DefaultLimits are the bounds of every event: 1 MiB, nesting 32 deep, 10,000
// elements per array or map. The envelope plus the largest event Archivist
// defines is a few kilobytes; JetStream's default max_payload is 1 MiB.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 32, MaxCount: 10_000}

// LimitError says which bound an input broke. It is permanent: the same
// bytes break it again.
type LimitError struct {
	// Bound names the bound, for example "msgpack depth".
	Bound string
	// Limit is the bound's value.
	Limit int64
	// Got is what the input declared or reached.
	Got int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s %d exceeds the limit of %d", e.Bound, e.Got, e.Limit)
}

// CheckMsgpack checks that b is exactly one well-formed msgpack value within
// lim: no longer than MaxBytes, no deeper than MaxDepth, no array or map
// longer than MaxCount, and no declared length (of a string, binary, array
// or map) larger than the bytes left to hold it. It walks the bytes without
// recursion and allocates only a stack of MaxDepth counters.
func CheckMsgpack(b []byte, lim Limits) error {
	if lim.MaxBytes > 0 && len(b) > lim.MaxBytes {
		return &LimitError{Bound: "msgpack message bytes", Limit: int64(lim.MaxBytes), Got: int64(len(b))}
	}
	if len(b) == 0 {
		return fmt.Errorf("msgpack: empty input")
	}
	// stack[i] is how many values the i-th open container still holds.
	var fixed [16]int64
	stack := fixed[:0]
	n := int64(len(b))
	pos := int64(0)
	for {
		if pos >= n {
			return fmt.Errorf("msgpack: truncated at byte %d", pos)
		}
		c := b[pos]
		pos++
		skip, open, width := int64(0), int64(-1), int64(0)
		pairs := false
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c <= 0x8f: // fixmap
			open, pairs = int64(c&0x0f), true
		case c <= 0x9f: // fixarray
			open = int64(c & 0x0f)
		case c <= 0xbf: // fixstr
			skip = int64(c & 0x1f)
		default:
			switch c {
			case 0xc4, 0xd9: // bin8, str8: a length
				width = 1
			case 0xc5, 0xda:
				width = 2
			case 0xc6, 0xdb:
				width = 4
			case 0xc7: // ext8: a length, then the type
				width, skip = 1, 1
			case 0xc8:
				width, skip = 2, 1
			case 0xc9:
				width, skip = 4, 1
			case 0xca, 0xce, 0xd2:
				skip = 4
			case 0xcb, 0xcf, 0xd3:
				skip = 8
			case 0xcc, 0xd0:
				skip = 1
			case 0xcd, 0xd1:
				skip = 2
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1-16 and the type
				skip = 1 + int64(1)<<(c-0xd4)
			case 0xdc:
				width, open = 2, 0
			case 0xdd:
				width, open = 4, 0
			case 0xde:
				width, open, pairs = 2, 0, true
			case 0xdf:
				width, open, pairs = 4, 0, true
			default: // 0xc1 is never used
				return fmt.Errorf("msgpack: invalid byte 0x%02x at %d", c, pos-1)
			}
		}
		if width > 0 {
			if n-pos < width {
				return fmt.Errorf("msgpack: truncated at byte %d", pos)
			}
			var v int64
			switch width {
			case 1:
				v = int64(b[pos])
			case 2:
				v = int64(binary.BigEndian.Uint16(b[pos:]))
			default:
				v = int64(binary.BigEndian.Uint32(b[pos:]))
			}
			pos += width
			if open >= 0 {
				open = v
			} else {
				skip += v
			}
		}
		if skip > n-pos {
			return fmt.Errorf("msgpack: at byte %d a length of %d runs past the end (%d bytes left)", pos, skip, n-pos)
		}
		pos += skip
		if open > 0 {
			if lim.MaxCount > 0 && open > int64(lim.MaxCount) {
				return &LimitError{Bound: "msgpack array or map length", Limit: int64(lim.MaxCount), Got: open}
			}
			if pairs {
				open *= 2
			}
			// Every element takes at least a byte.
			if open > n-pos {
				return fmt.Errorf("msgpack: at byte %d a length of %d runs past the end (%d bytes left)", pos, open, n-pos)
			}
			if lim.MaxDepth > 0 && len(stack)+1 > lim.MaxDepth {
				return &LimitError{Bound: "msgpack nesting depth", Limit: int64(lim.MaxDepth), Got: int64(len(stack) + 1)}
			}
			stack = append(stack, open)
			continue
		}
		// A value is complete: count it off its containers.
		for len(stack) > 0 {
			stack[len(stack)-1]--
			if stack[len(stack)-1] > 0 {
				break
			}
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			if pos != n {
				return fmt.Errorf("msgpack: %d bytes after the value", n-pos)
			}
			return nil
		}
	}
}

// UnmarshalMsgpack decodes b into v after checking it against lim, refusing
// fields v does not have when strict is set.
func UnmarshalMsgpack(b []byte, v any, lim Limits, strict bool) error {
	if err := CheckMsgpack(b, lim); err != nil {
		return err
	}
	return decodeMsgpack(b, v, strict)
}

// decodeMsgpack decodes checked bytes. vmihailenco/msgpack v5.4.1 panics on
// some well-formed input that does not fit the type (nil for a struct
// field: reflect.Value.IsNil on a struct), found by FuzzEnvelope: that is an
// error of the input here, not a crash.
func decodeMsgpack(b []byte, v any, strict bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("msgpack: input does not fit %T: %v", v, r)
		}
	}()
	if !strict {
		return msgpack.Unmarshal(b, v)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(strict)
	return dec.Decode(v)
}
