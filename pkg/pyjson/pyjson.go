// Package pyjson writes JSON strings and objects byte for byte as Python's
// json.dumps does by default, the way the web-archive tools written in
// Python (pywb, cdxj-indexer) write their CDXJ and JSON answers: ", " and
// ": " between items, every character outside printable ASCII escaped.
package pyjson

import "strings"

// Quote is s as a JSON string, as json.dumps writes it with ensure_ascii
// (its default): \" \\ \b \f \n \r \t, every other character outside
// printable ASCII as \u and four lower-case hex digits, a pair of
// surrogates past U+FFFF; a byte that is not UTF-8 as U+FFFD.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	const hex = "0123456789abcdef"
	u := func(c rune) {
		b.WriteString(`\u`)
		b.WriteByte(hex[c>>12&15])
		b.WriteByte(hex[c>>8&15])
		b.WriteByte(hex[c>>4&15])
		b.WriteByte(hex[c&15])
	}
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c >= ' ' && c <= '~':
			b.WriteByte(byte(c))
		case c > 0xffff:
			c -= 0x10000
			u(0xd800 | c>>10)
			u(0xdc00 | c&0x3ff)
		default:
			u(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Object is a JSON object of string values, keys in the order given, as
// json.dumps writes an OrderedDict: {"k": "v", "k2": "v2"}.
func Object(keys, vals []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Quote(k))
		b.WriteString(": ")
		b.WriteString(Quote(vals[i]))
	}
	b.WriteByte('}')
	return b.String()
}
