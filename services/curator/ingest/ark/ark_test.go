package ark

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSpellingsOfOneARK: the spellings the specification makes equal
// normalize to one form; those it tells apart do not.
func TestSpellingsOfOneARK(t *testing.T) {
	same := [][]string{
		{"ark:/99999/fk4abc", "ark:99999/fk4abc", "ARK:/99999/fk4abc", "Ark:99999/fk4abc", "ark:/99999/fk4-abc", "ark:/99999/f-k-4abc-",
			"ark:/99999/fk4abc/", "ark:/99999/fk4abc.", "ark:/99999/fk4abc./"},
		{"ark:/1234b/x%2fy", "ark:1234B/x%2Fy"},
		{"ark:/99999/fk4abc/page.1", "ark:99999/fk4-abc/page.1/"},
	}
	for _, group := range same {
		want, err := Normalize(group[0])
		if err != nil {
			t.Fatalf("%s: %v", group[0], err)
		}
		for _, s := range group[1:] {
			got, err := Normalize(s)
			if err != nil || got != want {
				t.Errorf("Normalize(%q) = %q, %v; want %q (as %q)", s, got, err, want, group[0])
			}
			if !Same(s, group[0]) {
				t.Errorf("Same(%q, %q) = false", s, group[0])
			}
		}
	}
	apart := [][2]string{
		{"ark:/99999/fk4abc", "ark:/99999/fk4a:bc"}, // one more ':' is another identifier
		{"ark:/99999/fk4abc", "ark:/99999/fk4ABC"},  // a name's case counts
		{"ark:/99999/fk4abc", "ark:/99998/fk4abc"},
		{"ark:/99999/a/b", "ark:/99999/a%2Fb"},
		{"ark:/99999/a_b", "ark:/99999/a/b"},
		{"ark:/99999/a.b", "ark:/99999/ab"},
	}
	for _, p := range apart {
		if Same(p[0], p[1]) {
			t.Errorf("%q and %q normalize alike: %q", p[0], p[1], must(Normalize(p[0])))
		}
		a, b := must(StoragePrefix(p[0])), must(StoragePrefix(p[1]))
		if a == b {
			t.Errorf("%q and %q share the storage prefix %q", p[0], p[1], a)
		}
	}
	for _, bad := range []string{"", "ark:", "ark:/99999", "ark:/99999/", "ark:/9999/x", "ark:/9999a/x", "ark:/99999/-", "ark:/99999/a b",
		"doi:10.1/x", "ark:/99999/é", strings.Repeat("x", 300)} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q): no error", bad)
		}
	}
}

// TestStoragePrefixIsOneToOne: over many random ARKs built from the
// characters that make keys collide (':', '/', '%', '_', '.', '-',
// case), two share a storage prefix exactly when they are one identifier,
// no prefix begins another, and every prefix is a valid blob key part.
func TestStoragePrefixIsOneToOne(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 1))
	const alphabet = "aAb:/%_.-2F~$"
	byPrefix := map[string]string{}
	var prefixes []string
	for range 20000 {
		n := 1 + r.IntN(6)
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		a := "ark:/99999/" + b.String()
		norm, err := Normalize(a)
		if err != nil {
			continue
		}
		p := must(StoragePrefix(a))
		if strings.Count(p, "/") != 2 || strings.ContainsAny(p[len("objects/"):len(p)-1], "/\\ ") {
			t.Fatalf("prefix %q of %q is not one key segment", p, a)
		}
		if prev, ok := byPrefix[p]; ok && prev != norm {
			t.Fatalf("%q and an ARK normalized %q share the prefix %q", a, prev, p)
		}
		if _, ok := byPrefix[p]; !ok {
			prefixes = append(prefixes, p)
		}
		byPrefix[p] = norm
	}
	norms := map[string]string{}
	for p, n := range byPrefix {
		if q, ok := norms[n]; ok && q != p {
			t.Fatalf("one identifier %q has two prefixes %q and %q", n, p, q)
		}
		norms[n] = p
	}
	for i, p := range prefixes {
		for _, q := range prefixes[i+1:] {
			if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
				t.Fatalf("prefix %q begins %q", p, q)
			}
		}
		if i > 400 {
			break
		}
	}
}

// TestShoulders: an ARK lies under its NAAN and the shoulders that begin
// its name, compared in normal form; a NAAN covers no longer NAAN.
func TestShoulders(t *testing.T) {
	cases := []struct {
		ark, shoulder string
		under         bool
	}{
		{"ark:/99999/fk4abc", "ark:/99999/fk4", true},
		{"ark:99999/fk4-abc", "ark:/99999/fk4", true},
		{"ark:/99999/fk4abc", "ark:/99999", true},
		{"ark:/99999/fk4abc", "ark:/99999/", true},
		{"ark:/999990/fk4abc", "ark:/99999", false},
		{"ark:/99999/fk5abc", "ark:/99999/fk4", false},
		{"ark:/99999/FK4abc", "ark:/99999/fk4", false},
		{"ark:/12345/fk4abc", "ark:/99999/fk4", false},
	}
	for _, c := range cases {
		if got := Under(c.ark, c.shoulder); got != c.under {
			t.Errorf("Under(%q, %q) = %t, want %t", c.ark, c.shoulder, got, c.under)
		}
	}
	if _, err := NormalizeShoulder("nope"); err == nil {
		t.Error("NormalizeShoulder(nope): no error")
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
