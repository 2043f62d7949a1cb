package surt_test

import (
	"testing"

	"github.com/archivist/archivist/pkg/surt"
)

func TestKeyExamples(t *testing.T) {
	for in, want := range map[string]string{
		"http://www.example.com/":               "com,example)/",
		"https://Example.COM/a/B?y=2&x=1":       "com,example)/a/b?x=1&y=2",
		"http://example.com:80/index.html#frag": "com,example)/index.html",
	} {
		if got := surt.Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzKey: no URL makes the SURT key panic, and a key is a function of its
// URL.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"http://www.example.com/", "https://a.b.c:8443/x/../y?q=%20&a=1", "dns:example.com", "urn:x", "http://[::1]:80/", "http://%zz/", "", "http://example.com/\t\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if a, b := surt.Key(u), surt.Key(u); a != b {
			t.Fatalf("Key(%q) differs between calls: %q, %q", u, a, b)
		}
	})
}
