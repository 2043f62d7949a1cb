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
	stack := make([]int64, 0, min(max(lim.MaxDepth, 1), 64))
	pos := 0
	need := func(n int64) error {
		if n < 0 || n > int64(len(b)-pos) {
			return fmt.Errorf("msgpack: at byte %d a length of %d runs past the end (%d bytes left)", pos, n, len(b)-pos)
		}
		return nil
	}
	uint := func(width int) (int64, error) {
		if err := need(int64(width)); err != nil {
			return 0, err
		}
		var v uint64
		switch width {
		case 1:
			v = uint64(b[pos])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[pos:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[pos:]))
		}
		pos += width
		return int64(v), nil
	}
	for {
		if err := need(1); err != nil {
			return fmt.Errorf("msgpack: truncated at byte %d", pos)
		}
		c := b[pos]
		pos++
		var skip, open int64 = 0, -1
		var err error
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			open = 2 * int64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			open = int64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			skip = int64(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			skip, err = uint(1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			skip, err = uint(2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			skip, err = uint(4)
		case c == 0xc7: // ext8: length, type
			skip, err = uint(1)
			skip++
		case c == 0xc8:
			skip, err = uint(2)
			skip++
		case c == 0xc9:
			skip, err = uint(4)
			skip++
		case c == 0xca:
			skip = 4
		case c == 0xcb:
			skip = 8
		case c == 0xcc || c == 0xd0:
			skip = 1
		case c == 0xcd || c == 0xd1:
			skip = 2
		case c == 0xce || c == 0xd2:
			skip = 4
		case c == 0xcf || c == 0xd3:
			skip = 8
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16 plus the type byte
			skip = 1 + int64(1)<<(c-0xd4)
		case c == 0xdc:
			open, err = uint(2)
		case c == 0xdd:
			open, err = uint(4)
		case c == 0xde:
			open, err = uint(2)
			open *= 2
		case c == 0xdf:
			open, err = uint(4)
			open *= 2
		default: // 0xc1 is never used
			return fmt.Errorf("msgpack: invalid byte 0x%02x at %d", c, pos-1)
		}
		if err != nil {
			return err
		}
		if err := need(skip); err != nil {
			return err
		}
		pos += int(skip)
		if open >= 0 {
			count := open
			if c >= 0x80 && c <= 0x8f || c == 0xde || c == 0xdf {
				count = open / 2
			}
			if lim.MaxCount > 0 && count > int64(lim.MaxCount) {
				return &LimitError{Bound: "msgpack array or map length", Limit: int64(lim.MaxCount), Got: count}
			}
			// Every element takes at least a byte.
			if err := need(open); err != nil {
				return err
			}
			if open > 0 {
				if lim.MaxDepth > 0 && len(stack)+1 > lim.MaxDepth {
					return &LimitError{Bound: "msgpack nesting depth", Limit: int64(lim.MaxDepth), Got: int64(len(stack) + 1)}
				}
				stack = append(stack, open)
				continue
			}
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
			if pos != len(b) {
				return fmt.Errorf("msgpack: %d bytes after the value", len(b)-pos)
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
	if !strict {
		return msgpack.Unmarshal(b, v)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(strict)
	return dec.Decode(v)
}
