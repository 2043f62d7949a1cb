package pyjson

import "testing"

// TestQuoteIsJSONDumps: strings as Python's json.dumps writes them (the
// expected values are its output).
func TestQuoteIsJSONDumps(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           `"plain"`,
		`say "hi" \ back`: `"say \"hi\" \\ back"`,
		"\b\f\n\r\t":      `"\b\f\n\r\t"`,
		"\x00\x1f\x7f":    `"\u0000\u001f\u007f"`,
		"café":            `"caf\u00e9"`,
		"日本":              `"\u65e5\u672c"`,
		"😀":               `"\ud83d\ude00"`,
		"<&>":             `"<&>"`,
		"\xff":            `"\ufffd"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Object([]string{"url", "status"}, []string{"http://a/", "200"}); got != `{"url": "http://a/", "status": "200"}` {
		t.Errorf("Object: %s", got)
	}
	if got := Object(nil, nil); got != `{}` {
		t.Errorf("Object of nothing: %s", got)
	}
}
