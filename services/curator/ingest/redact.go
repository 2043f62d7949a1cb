package ingest

import (
	"net/url"
	"regexp"
	"strings"
)

// scrubURLs is text (an error, a move's detail) with every URL in it
// redacted as RedactURL does, before it is stored or shown.
func scrubURLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	return urlInText.ReplaceAllStringFunc(text, RedactURL)
}

// urlInText finds URLs in text: a scheme, then up to white space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// RedactURL is a URL as a job view shows it: without user info or query
// string, which may carry credentials or presigned tokens.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "REDACTED"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	u.Fragment = ""
	return u.String()
}

// ScrubText is text as the queue stores it (an error, a move's detail):
// every URL redacted as a job view shows it, valid UTF-8 without NULs,
// within n bytes.
func ScrubText(text string, n int) string {
	s := strings.ToValidUTF8(strings.ReplaceAll(scrubURLs(text), "\x00", ""), "?")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}
