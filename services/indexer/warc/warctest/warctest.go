// Package warctest makes WARC files for tests: small, valid, each record a
// gzip member of its own, as crawlers write them.
package warctest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// Gzipped is a WARC file of pages response records of host (URLs
// http://HOST/p/0, /p/1, ...; dates in March 2026), each record a gzip
// member of its own.
func Gzipped(host string, pages int) []byte {
	return dated(host, pages, func(i int) time.Time { return time.Date(2026, 3, 1+i%9, 0, 0, 0, 0, time.UTC) })
}

// Dated is Gzipped with every capture made at at (to the second).
func Dated(host string, pages int, at time.Time) []byte {
	return dated(host, pages, func(int) time.Time { return at })
}

func dated(host string, pages int, at func(i int) time.Time) []byte {
	var out bytes.Buffer
	for i := range pages {
		body := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>%d</p>", i)
		rec := fmt.Sprintf("WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://%s/p/%d\r\nWARC-Date: %s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			host, i, at(i).UTC().Format(time.RFC3339), len(body), body)
		w := gzip.NewWriter(&out)
		w.Write([]byte(rec))
		w.Close()
	}
	return out.Bytes()
}

// Crawl writes a gzipped WARC file like a crawler's, of about size bytes:
// a warcinfo record, then request and response records in turn, each a
// gzip member of its own; seven responses in ten carry precompressed
// payloads (random bytes, 5 to 100 KiB: images, video, archives), three in
// ten HTML (compressible text, 5 to 50 KiB); responses carry their
// payload and block digests. seed makes it reproducible.
// It returns the number of responses.
func Crawl(w io.Writer, size int64, seed uint64) (int, error) {
	return crawl(w, size, seed, mix{binary: 7, binMin: 5 << 10, binMax: 100 << 10, textMin: 5 << 10, textMax: 50 << 10})
}

// Pages writes a crawl of web pages, as wget's of a site is: small
// records, most of them text. Like Crawl, but of the responses two in ten
// are redirects (a body of 100 to 300 bytes), three small images (random
// bytes, 1 to 20 KiB) and five HTML, CSS or script (text of a vocabulary
// of 3,000 words, which compresses some four to one, 1 to 30 KiB).
func Pages(w io.Writer, size int64, seed uint64) (int, error) {
	return crawl(w, size, seed, mix{tiny: 2, binary: 3, binMin: 1 << 10, binMax: 20 << 10, textMin: 1 << 10, textMax: 30 << 10, vocab: 3000})
}

// mix is a crawl's responses: tiny in ten redirects; binary in ten
// precompressed, of binMin to binMax bytes; the others text of textMin to
// textMax, of vocab made-up words (0: a dozen words of HTML).
type mix struct {
	tiny, binary                     int
	binMin, binMax, textMin, textMax int
	vocab                            int
}

func crawl(w io.Writer, size int64, seed uint64, m mix) (int, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	cw := &countWriter{w: w}
	gz, _ := gzip.NewWriterLevel(cw, gzip.DefaultCompression)
	member := func(rec []byte) error {
		gz.Reset(cw)
		if _, err := gz.Write(rec); err != nil {
			return err
		}
		return gz.Close()
	}
	record := func(typ, uri, date string, block []byte, extra string) []byte {
		return fmt.Appendf(nil, "WARC/1.0\r\nWARC-Type: %s\r\nWARC-Target-URI: %s\r\nWARC-Date: %s\r\nWARC-Record-ID: <urn:uuid:%08x-0000-4000-8000-%012x>\r\n%sContent-Length: %d\r\n\r\n%s\r\n\r\n",
			typ, uri, date, r.Uint32(), r.Uint64()&0xffffffffffff, extra, len(block), block)
	}
	info := []byte("software: archivist warctest\r\nformat: WARC File Format 1.0\r\n")
	if err := member(record("warcinfo", "", "2026-03-01T00:00:00Z", info, "Content-Type: application/warc-fields\r\n")); err != nil {
		return 0, err
	}
	words := []string{"archive", "the", "web", "page", "of", "collection", "news", "<p>", "</p>", "<a href=\"/x\">", "</a>", "and", "2026"}
	for range m.vocab {
		word := make([]byte, 3+r.IntN(8))
		for i := range word {
			word[i] = 'a' + byte(r.IntN(26))
		}
		words = append(words, string(word))
	}
	n := 0
	for cw.n < size {
		uri := fmt.Sprintf("http://site%d.example/%s/%d", r.IntN(200), []string{"img", "video", "doc", "page"}[r.IntN(4)], n)
		date := fmt.Sprintf("2026-03-%02dT%02d:%02d:%02dZ", 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
		req := fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: example\r\nUser-Agent: warctest\r\n\r\n", uri)
		if err := member(record("request", uri, date, req, "Content-Type: application/http; msgtype=request\r\n")); err != nil {
			return n, err
		}
		var payload []byte
		ctype, status := "text/html", "200 OK"
		kind := r.IntN(10)
		switch {
		case kind < m.tiny:
			status = "301 Moved Permanently"
			payload = fmt.Appendf(nil, "<html><body><a href=\"%s/\">moved</a>%s</body></html>", uri, bytes.Repeat([]byte(" "), r.IntN(200)))
		case kind < m.tiny+m.binary:
			payload = make([]byte, m.binMin+r.IntN(m.binMax-m.binMin))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
			ctype = "image/jpeg"
		default:
			var b bytes.Buffer
			for target := m.textMin + r.IntN(m.textMax-m.textMin); b.Len() < target; {
				b.WriteString(words[r.IntN(len(words))])
				b.WriteByte(' ')
			}
			payload = b.Bytes()
		}
		http := append(fmt.Appendf(nil, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", status, ctype, len(payload)), payload...)
		// As crawlers write them: the payload's and the block's digests.
		pd, bd := sha1.Sum(payload), sha1.Sum(http)
		digests := "WARC-Payload-Digest: sha1:" + base32.StdEncoding.EncodeToString(pd[:]) + "\r\nWARC-Block-Digest: sha1:" + base32.StdEncoding.EncodeToString(bd[:]) + "\r\n"
		if err := member(record("response", uri, date, http, digests+"Content-Type: application/http; msgtype=response\r\n")); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
