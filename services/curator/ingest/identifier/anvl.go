package identifier

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// EZID's API speaks ANVL: one "name: value" element per line, with '%',
// line ends (and, in names, ':') percent-encoded.
var (
	anvlValue = strings.NewReplacer("%", "%25", "\n", "%0A", "\r", "%0D")
	anvlName  = strings.NewReplacer("%", "%25", "\n", "%0A", "\r", "%0D", ":", "%3A")
)

// EncodeANVL writes metadata as an ANVL body, its elements by name.
func EncodeANVL(meta map[string]string) string {
	names := make([]string, 0, len(meta))
	for k := range meta {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", anvlName.Replace(k), anvlValue.Replace(meta[k]))
	}
	return b.String()
}

// DecodeANVL reads an ANVL body (at most max bytes) into its elements.
func DecodeANVL(r io.Reader, max int64) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, max))
	sc.Buffer(make([]byte, 4096), int(min(max, 1<<20)))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("ANVL line %.80q has no ':'", line)
		}
		n, err := unescape(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		v, err := unescape(strings.TrimSpace(value))
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, sc.Err()
}

// unescape decodes ANVL's percent-encoding.
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("ANVL: a '%%' ends %.80q", s)
		}
		var c byte
		if _, err := fmt.Sscanf(s[i+1:i+3], "%02X", &c); err != nil {
			return "", fmt.Errorf("ANVL: bad escape %q", s[i:i+3])
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}
