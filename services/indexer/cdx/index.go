// Package cdx writes CDX11 and CDXJ index lines of archive records as pywb's
// cdx-indexer does (docs/indexing.md lists its choices, which it follows).
package cdx

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/archivist/archivist/pkg/pyjson"
	"github.com/archivist/archivist/pkg/surt"
	"github.com/archivist/archivist/services/indexer/warc"
)

// Header is the first line of a CDX11 file.
const Header = " CDX N b a m s k r M S V g"

// Entry is one CDX line's fields.
type Entry struct {
	URLKey, Timestamp, URL, Mime, Status, Digest string
	// MimeDetected is the record's WARC-Identified-Payload-Type, if any
	// (CDXJ only).
	MimeDetected   string
	Length, Offset int64
	Filename       string
	// NamedDigest is the payload digest with its algorithm, as the record
	// names it ("sha1:..." from WARC-Payload-Digest) or "sha1:" and the
	// one computed; "" for none (cdxj-indexer's dialect writes it so).
	NamedDigest string
	// HTTPStatus is the status of the record's HTTP head, when it has one
	// that reads (a revisit's too), and ContentType its declared type (the
	// HTTP head's, or a resource's record header), "" for none:
	// cdxj-indexer's dialect writes these, where pywb's counts a response
	// without a status as 200, leaves a revisit's out, and writes "unk"
	// for no type.
	HTTPStatus, ContentType string
}

// String is the CDX11 line (without newline): N b a m s k r M S V g. A
// space or control byte in the URL is written as %XX (pywb writes an ARC
// record's spaces raw, which splits the URL into more fields for every
// reader of the line).
func (e Entry) String() string {
	var b strings.Builder
	url := escapeURL(e.URL)
	b.Grow(len(e.URLKey) + len(e.Timestamp) + len(url) + len(e.Mime) + len(e.Status) + len(e.Digest) + len(e.Filename) + 60)
	for _, f := range [...]string{e.URLKey, e.Timestamp, url, e.Mime, e.Status, e.Digest} {
		b.WriteString(field(f))
		b.WriteByte(' ')
	}
	b.WriteString("- - ")
	var n [20]byte
	b.Write(strconv.AppendInt(n[:0], e.Length, 10))
	b.WriteByte(' ')
	b.Write(strconv.AppendInt(n[:0], e.Offset, 10))
	b.WriteByte(' ')
	b.WriteString(field(e.Filename))
	return b.String()
}

// field is v, or "-" (CDX's empty field) when v is empty.
func field(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// FromRecord returns the entry of a record, and false for a record the
// index leaves out (warcinfo, request, WARC fields metadata, an ARC file's
// own header), as pywb's default selection does.
func FromRecord(rec *warc.Record, filename string) (Entry, bool) {
	switch {
	case rec.Format == "arc":
		return fromARC(rec, filename)
	case leftOut(rec):
		return Entry{}, false
	}
	e := Entry{URL: rec.Header.Get("WARC-Target-URI"), Timestamp: timestamp14(rec.Header.Get("WARC-Date")),
		Length: rec.Length, Offset: rec.Offset, Filename: filename, Status: "-"}
	// pywb writes spaces in a WARC target URI as %20; so are tabs and
	// other control bytes, which would split a CDX line into more fields.
	e.URL = escapeURL(strings.Trim(e.URL, "<>"))
	e.URLKey = escapeURL(surt.Key(e.URL))
	payload := rec.Block
	var status, ctype string
	if rec.Type() == "response" || rec.Type() == "revisit" {
		// HTTP headers are parsed whatever the status line's protocol says
		// ("HTTPX/1.1 200 OK" is indexed as 200).
		status, ctype, payload = parseHTTP(rec.Block)
	} else {
		ctype = rec.Header.Get("Content-Type")
	}
	switch {
	case rec.Type() == "revisit":
		e.Mime = "warc/revisit"
	default:
		e.Mime = mimeOf(ctype, "unk")
		e.MimeDetected = rec.Header.Get("WARC-Identified-Payload-Type")
	}
	if rec.Type() == "response" {
		// A response without a readable status line counts as 200, as pywb
		// (warcio) reads it.
		e.Status = "200"
		if isStatus(status) {
			e.Status = status
		}
	}
	if isStatus(status) {
		e.HTTPStatus = status
	}
	e.ContentType = mimeOf(ctype, "")
	e.Digest = headerDigest(rec)
	if e.Digest != "" {
		e.NamedDigest = rec.Header.Get("WARC-Payload-Digest")
	} else {
		e.Digest = "-"
		if rec.Type() != "revisit" {
			e.Digest = digestOf(rec, payload)
			e.NamedDigest = "sha1:" + e.Digest
		}
	}
	return e, true
}

// leftOut reports whether the index leaves a WARC record out: warcinfo,
// request, WARC fields metadata.
func leftOut(rec *warc.Record) bool {
	t := rec.Type()
	return t == "warcinfo" || t == "request" ||
		strings.HasPrefix(strings.ToLower(rec.Header.Get("Content-Type")), "application/warc-fields")
}

// PayloadStart is the warc.Options.Digest of CDX indexing: where in the
// block the payload starts (after the HTTP headers of a response or an ARC
// record), for the records whose digest the index computes (those without
// a WARC-Payload-Digest, revisits apart).
func PayloadStart(rec *warc.Record) (int, bool) {
	switch {
	case rec.Format == "arc":
		return httpHeadEnd(rec.Block), rec.Type() != "warcinfo"
	case leftOut(rec), rec.Type() == "revisit" || headerDigest(rec) != "":
		return 0, false
	case rec.Type() == "response":
		return httpHeadEnd(rec.Block), true
	}
	return 0, true
}

// headerDigest is the record's WARC-Payload-Digest without its "sha1:"
// prefix, or "" when absent or not a digest: a value with spaces or other
// bytes no digest has would add fields to the CDX line (and so could name
// another file's offset and length); the index computes its own instead.
func headerDigest(rec *warc.Record) string {
	d := strings.TrimPrefix(rec.Header.Get("WARC-Payload-Digest"), "sha1:")
	if len(d) > 128 {
		return ""
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("+/=:_.-", c) >= 0) {
			return ""
		}
	}
	return d
}

// escapeURL writes the bytes of a URL that would end or split a CDX field
// (space, tab and every other control byte) as %XX.
func escapeURL(u string) string {
	clean := true
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return u
	}
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// digestOf is the payload's digest: the one the reader streamed when the
// block was longer than it keeps, else that of payload.
func digestOf(rec *warc.Record, payload []byte) string {
	if rec.PayloadSHA1 != nil {
		return base32.StdEncoding.EncodeToString(rec.PayloadSHA1)
	}
	return digest(payload)
}

func fromARC(rec *warc.Record, filename string) (Entry, bool) {
	if rec.Type() == "warcinfo" {
		return Entry{}, false
	}
	// Kept as pywb reads it (spaces included) for CDXJ, where it is a JSON
	// string; String escapes it for the space-separated CDX11 line.
	url := strings.NewReplacer("\r", "%0D", "\n", "%0A", "\x0c", "%0C", "\x00", "%00").Replace(rec.Header.Get("WARC-Target-URI"))
	ts := rec.Header.Get("WARC-Date")
	if len(ts) > 14 {
		ts = ts[:14]
	}
	e := Entry{URL: url, URLKey: escapeURL(surt.Key(url)), Timestamp: ts, Length: rec.Length, Offset: rec.Offset, Filename: filename,
		Mime: mimeOf(rec.Header.Get("Content-Type"), "unk"), Status: "-"}
	// The block is read as an HTTP response; a status line that is not one
	// counts as 200, with an empty payload, as pywb reads ARC records.
	status, ctype, payload := parseHTTP(rec.Block)
	e.Status = "200"
	if isStatus(status) {
		e.Status, e.HTTPStatus, e.ContentType = status, status, mimeOf(ctype, "")
	}
	e.Digest = digestOf(rec, payload)
	e.NamedDigest = "sha1:" + e.Digest
	return e, true
}

func isStatus(s string) bool {
	return len(s) == 3 && s[0] >= '1' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}

// timestamp14 turns a WARC-Date (ISO 8601) into 14 digits.
func timestamp14(iso string) string {
	var b [14]byte
	n := 0
	for i := 0; i < len(iso) && n < 14; i++ {
		if c := iso[i]; c >= '0' && c <= '9' {
			b[n] = c
			n++
		}
	}
	for ; n < 14; n++ {
		b[n] = '0'
	}
	return string(b[:])
}

// mimeOf is a Content-Type's type and subtype (up to a ';' or a space), or
// def if empty.
func mimeOf(ct, def string) string {
	m, _, _ := strings.Cut(ct, ";")
	if f := firstField(m); f != "" {
		return f
	}
	return def
}

// firstField is strings.Fields(s)[0], or "" for none, without the slice.
func firstField(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return s[:i]
	}
	return s
}

// parseHTTP splits an HTTP response into its status code, content type and
// payload (what follows the headers, not de-chunked: pywb digests the raw
// payload).
func parseHTTP(b []byte) (status, ctype string, payload []byte) {
	end, headEnd := httpHead(b)
	head := b[:end]
	// Line by line as a bufio.Scanner splits them (ScanLines), which
	// stops at a line that does not fit its buffer.
	for first := true; len(head) > 0; first = false {
		line, rest, found := bytes.Cut(head, []byte("\n"))
		if n := len(line); n+1 > bufio.MaxScanTokenSize || !found && n > bufio.MaxScanTokenSize {
			break
		}
		head = rest
		line = bytes.TrimRight(line, "\r")
		if first {
			// strings.Fields(line)[1], if any
			l := strings.TrimLeftFunc(string(line), unicode.IsSpace)
			if i := strings.IndexFunc(l, unicode.IsSpace); i >= 0 {
				status = firstField(l[i:])
			}
			continue
		}
		if name, value, ok := bytes.Cut(line, []byte(":")); ok && ctype == "" && bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Type")) {
			ctype = string(bytes.TrimSpace(value))
		}
	}
	return status, ctype, b[headEnd:]
}

// httpHead finds the end of an HTTP head in b: where its last header line
// ends, and where the payload starts (both len(b) without a blank line).
func httpHead(b []byte) (end, headEnd int) {
	end = bytes.Index(b, []byte("\r\n\r\n"))
	headEnd = end + 4
	if end < 0 {
		if end = bytes.Index(b, []byte("\n\n")); end < 0 {
			end, headEnd = len(b), len(b)
		} else {
			headEnd = end + 2
		}
	}
	return end, headEnd
}

func httpHeadEnd(b []byte) int {
	_, h := httpHead(b)
	return h
}

// digest is the payload's sha1 in base32, as CDX writes it.
func digest(payload []byte) string {
	s := sha1.Sum(payload)
	return base32.StdEncoding.EncodeToString(s[:])
}

// CDXJ is the CDXJ line (without newline): urlkey, timestamp and a JSON
// object of the other fields, as pywb's cdx-indexer -j writes it (status
// left out when unknown; values as strings; Python's separators).
func (e Entry) CDXJ() string {
	mime, status, digest := e.Mime, e.Status, e.Digest
	if status == "-" {
		status = ""
	}
	if digest == "-" {
		digest = ""
	}
	return e.cdxj(mime, e.MimeDetected, status, digest)
}

// CDXJIndexer is the CDXJ line (without newline) as webrecorder's
// cdxj-indexer writes it, the dialect many pywb collections are indexed
// with: its fields url, mime, status, digest, length, offset, filename;
// the digest with its algorithm ("sha1:..."); a revisit's HTTP status
// kept; no mime-detected.
func (e Entry) CDXJIndexer() string {
	mime := e.ContentType
	if e.Mime == "warc/revisit" {
		mime = e.Mime
	}
	return e.cdxj(mime, "", e.HTTPStatus, e.NamedDigest)
}

// cdxj writes a CDXJ line with these values of the dialect's fields, each
// left out when empty.
func (e Entry) cdxj(mime, detected, status, digest string) string {
	keys, vals := []string{"url"}, []string{e.URL}
	for _, kv := range [][2]string{{"mime", mime}, {"mime-detected", detected}, {"status", status}, {"digest", digest}} {
		if kv[1] != "" {
			keys, vals = append(keys, kv[0]), append(vals, kv[1])
		}
	}
	keys = append(keys, "length", "offset", "filename")
	vals = append(vals, strconv.FormatInt(e.Length, 10), strconv.FormatInt(e.Offset, 10), e.Filename)
	return e.URLKey + " " + e.Timestamp + " " + pyjson.Object(keys, vals)
}

// CDX11Indexer is the CDX11 line (without newline) as cdxj-indexer -11
// writes it: its mime, status and digest (without the algorithm), "-"
// where it has none.
func (e Entry) CDX11Indexer() string {
	mime := e.ContentType
	if e.Mime == "warc/revisit" {
		mime = e.Mime
	}
	d := e.NamedDigest
	if i := strings.LastIndexByte(d, ':'); i >= 0 {
		d = d[i+1:]
	}
	return fmt.Sprintf("%s %s %s %s %s %s - - %d %d %s", field(e.URLKey), field(e.Timestamp), field(escapeURL(e.URL)), field(mime), field(e.HTTPStatus), field(d), e.Length, e.Offset, field(e.Filename))
}
