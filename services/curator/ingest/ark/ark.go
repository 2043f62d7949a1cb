// Package ark is the syntax of an Archival Resource Key as the archive
// compares and stores it: when two spellings name one identifier (the ARK
// specification's normalization, draft-kunze-ark "Normalization and
// lexical equivalence"), whether an ARK lies under a shoulder, and the
// one-to-one mapping from an ARK to the blob keys of its object.
package ark

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest ARK accepted, in bytes, as spelled.
const MaxLen = 256

// Normalize returns the normal form of the ARK s, or why s is none. Two
// spellings name the same identifier exactly when their normal forms are
// equal. The normal form is the specification's: the label "ark:" in
// lower case without the optional "/" after it ("ark:/12345/x" and
// "ARK:12345/x" are "ark:12345/x"); the NAAN (five or more digits or NOID
// consonants) in lower case; the hyphens of the name removed (they are
// identity-inert); the hexadecimal digits of a %-encoding in upper case;
// and a final "/" or "." removed. Everything else, the letters' case of
// the name included, tells identifiers apart: "ark:12345/ab" and
// "ark:12345/a:b" are two.
func Normalize(s string) (string, error) {
	if len(s) > MaxLen {
		return "", fmt.Errorf("not an ARK: %d bytes, at most %d", len(s), MaxLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return "", errors.New("not an ARK (ark:/NAAN/NAME): only printable ASCII, no spaces")
		}
	}
	if len(s) < 4 || !strings.EqualFold(s[:4], "ark:") {
		return "", errors.New("not an ARK (ark:/NAAN/NAME): it starts with ark:")
	}
	rest := strings.TrimPrefix(s[4:], "/")
	naan, name, ok := strings.Cut(rest, "/")
	naan = strings.ToLower(naan)
	if !ok || len(naan) < 5 || strings.Trim(naan, "0123456789bcdfghjkmnpqrstvwxz") != "" {
		return "", errors.New("not an ARK (ark:/NAAN/NAME): the NAAN is five or more digits or NOID consonants")
	}
	name = strings.ReplaceAll(name, "-", "")
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '%' && i+2 < len(name) && isHex(name[i+1]) && isHex(name[i+2]) {
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(name[i+1 : i+3]))
			i += 2
			continue
		}
		b.WriteByte(c)
	}
	n := strings.TrimRight(b.String(), "/.")
	if n == "" {
		return "", errors.New("not an ARK (ark:/NAAN/NAME): the name is empty")
	}
	return "ark:" + naan + "/" + n, nil
}

// Check reports why s is not an ARK (nil when it is one).
func Check(s string) error {
	_, err := Normalize(s)
	return err
}

// Same reports whether a and b are spellings of one ARK.
func Same(a, b string) bool {
	na, err := Normalize(a)
	if err != nil {
		return false
	}
	nb, err := Normalize(b)
	return err == nil && na == nb
}

// NormalizeShoulder returns the normal form of a shoulder or a NAAN
// ("ark:/12345/fk4", "ark:/12345" or "ark:/12345/"): the prefix every
// normalized ARK under it starts with. A NAAN alone ends in "/", so that
// "ark:/12345" covers "ark:/12345/x" but not "ark:/123456/x".
func NormalizeShoulder(s string) (string, error) {
	t := strings.TrimRight(s, "/")
	if i := strings.IndexByte(t, ':'); i >= 0 && !strings.Contains(strings.TrimPrefix(t[i+1:], "/"), "/") {
		// A NAAN alone.
		n, err := Normalize(t + "/x")
		if err != nil {
			return "", fmt.Errorf("not a shoulder or NAAN: %w", err)
		}
		return strings.TrimSuffix(n, "x"), nil
	}
	n, err := Normalize(t)
	if err != nil {
		return "", fmt.Errorf("not a shoulder or NAAN: %w", err)
	}
	return n, nil
}

// Under reports whether the ARK a lies under shoulder (a shoulder or a
// NAAN, as NormalizeShoulder reads it), both compared in normal form.
func Under(a, shoulder string) bool {
	na, err := Normalize(a)
	if err != nil {
		return false
	}
	ns, err := NormalizeShoulder(shoulder)
	return err == nil && strings.HasPrefix(na, ns)
}

// StoragePrefix is where the object the ARK a names keeps its versions in
// the blob store: "objects/" and the normal form with every byte other
// than a letter, a digit or one of ":._~=*+@$" %-encoded ("/" as %2F, "%"
// as %25), then "/". The mapping is one to one: two ARKs share a prefix
// exactly when they are one identifier, and no prefix is another's
// beginning. A version's file is at StoragePrefix + "v<N>/" + its path.
func StoragePrefix(a string) (string, error) {
	n, err := Normalize(a)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("objects/")
	for i := 0; i < len(n); i++ {
		c := n[i]
		if isAlnum(c) || strings.IndexByte(":._~=*+@$", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	b.WriteByte('/')
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
