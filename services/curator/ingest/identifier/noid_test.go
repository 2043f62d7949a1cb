package identifier

import (
	"strings"
	"testing"
)

// TestNoidSpellsEachNumberOnceWithACheck: every number is spelled
// differently, in at least six NOID digits and a check character that a
// change of any one character breaks.
func TestNoidSpellsEachNumberOnceWithACheck(t *testing.T) {
	const xdigits = "0123456789bcdfghjkmnpqrstvwxz"
	check := func(s string) byte {
		sum := 0
		for i, c := range []byte(s) {
			sum += (i + 1) * strings.IndexByte(xdigits, c)
		}
		return xdigits[sum%29]
	}
	if got := noid(0); got != "0000000" {
		t.Errorf("noid(0) = %q, want 0000000", got)
	}
	seen := map[string]bool{}
	for n := int64(0); n < 30_000; n += 7 {
		s := noid(n)
		if len(s) < 7 || seen[s] {
			t.Fatalf("noid(%d) = %q: short or repeated", n, s)
		}
		seen[s] = true
		body := s[:len(s)-1]
		if check(body) != s[len(s)-1] {
			t.Fatalf("noid(%d) = %q: wrong check character", n, s)
		}
		for i := range body {
			for _, c := range []byte(xdigits) {
				if c == body[i] {
					continue
				}
				changed := body[:i] + string(c) + body[i+1:]
				if check(changed) == s[len(s)-1] {
					t.Fatalf("noid(%d) = %q: %q has the same check", n, s, changed)
				}
			}
		}
	}
}
