// Package surt computes the sort-friendly URL keys of CDX indexes, as the
// surt library pywb uses does by default. The indexer writes them; the
// aggregator looks them up.
package surt

import (
	"net"
	"sort"
	"strings"
)

// stripWWW strips what the IA canonicaliser does from a host: "www.",
// "www2.", ... (the regular expression ^www\d*\.).
func stripWWW(host string) string {
	if !strings.HasPrefix(host, "www") {
		return host
	}
	i := 3
	for i < len(host) && '0' <= host[i] && host[i] <= '9' {
		i++
	}
	if i < len(host) && host[i] == '.' {
		return host[i+1:]
	}
	return host
}

// Key returns the sort-friendly URL key of a URL, as the surt library that
// pywb uses computes it by default: scheme and fragment dropped, host
// lower-cased, "www." stripped and reversed with commas, default port
// dropped, path and query lower-cased, query arguments sorted, a trailing
// slash dropped from a non-empty path. A URL without "//" (dns:, urn:) is
// returned lower-cased; one without a host (file:///) keeps its scheme.
func Key(raw string) string {
	u := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, strings.TrimSpace(raw))
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return strings.ToLower(u)
	}
	scheme = strings.ToLower(scheme)
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	host, port := authority, ""
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	}
	host = strings.Trim(strings.ToLower(host), ".")
	host = stripWWW(host)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	path, query, hasQuery := strings.Cut(pathQuery, "?")
	path = canonicalPath(path)
	if host == "" { // file:///path
		return scheme + ":" + path
	}
	var b strings.Builder
	labels := strings.Split(host, ".")
	for i := len(labels) - 1; i >= 0; i-- {
		b.WriteString(labels[i])
		if i > 0 {
			b.WriteByte(',')
		}
	}
	if port != "" {
		b.WriteString(":" + port)
	}
	b.WriteByte(')')
	b.WriteString(path)
	if q := canonicalQuery(query); hasQuery && q != "" {
		b.WriteString("?" + q)
	}
	return b.String()
}

// canonicalPath lower-cases the path, resolves "." and ".." segments,
// escapes what must be escaped, and drops a trailing slash unless the path
// is just "/".
func canonicalPath(p string) string {
	if p == "" {
		return "/"
	}
	p = strings.ToLower(escape(unescape(p)))
	if !strings.Contains(p, "/.") { // no "." or ".." segment: the slashes alone
		if len(p) > 1 && strings.HasSuffix(p, "/") {
			if p = strings.TrimRight(p, "/"); p == "" {
				p = "/"
			}
		}
		return p
	}
	segs := strings.Split(p, "/")
	var out []string
	for _, s := range segs[1:] {
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	p = "/" + strings.Join(out, "/")
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	return p
}

// canonicalQuery lower-cases the query and sorts its arguments.
func canonicalQuery(q string) string {
	if q == "" {
		return ""
	}
	args := strings.Split(strings.ToLower(escape(unescape(q))), "&")
	kept := args[:0]
	for _, a := range args {
		if a != "" {
			kept = append(kept, a)
		}
	}
	sort.Strings(kept)
	return strings.Join(kept, "&")
}

// unescape decodes %XX escapes repeatedly, as the Google canonicaliser
// does, leaving invalid escapes alone.
func unescape(s string) string {
	for {
		d := unescapeOnce(s)
		if d == s {
			return s
		}
		s = d
	}
}

func unescapeOnce(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escape percent-encodes control characters, space, '#', '%' and bytes
// beyond ASCII.
func escape(s string) string {
	const hexd = "0123456789ABCDEF"
	clean := true
	for i := 0; i < len(s) && clean; i++ {
		c := s[i]
		clean = c > 0x20 && c < 0x7f && c != '#' && c != '%'
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '#' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
