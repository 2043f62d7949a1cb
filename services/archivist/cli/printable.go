package cli

import (
	"fmt"
	"io"
)

// printable writes what it is given with every control character but tab
// and line feed (C0, DEL and C1) replaced by its \uXXXX escape, so that
// text others wrote (a dead letter's headers, an origin's error, a
// publisher's title) printed by the CLI cannot move the cursor, rename the
// terminal or hide a line. The escape is valid inside a JSON string too.
type printable struct {
	w     io.Writer
	carry byte // a UTF-8 lead byte of a C1 character, split across writes
}

// Write implements io.Writer.
func (p *printable) Write(b []byte) (int, error) {
	out := make([]byte, 0, len(b)+8)
	in := b
	if p.carry != 0 {
		in = append([]byte{p.carry}, b...)
		p.carry = 0
	}
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\t' || c == '\n':
			out = append(out, c)
		case c < 0x20 || c == 0x7f:
			out = fmt.Appendf(out, `\u%04x`, c)
		case c == 0xc2 && i+1 == len(in):
			p.carry = c
		case c == 0xc2 && in[i+1] >= 0x80 && in[i+1] <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, in[i+1])
			i++
		default:
			out = append(out, c)
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
