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
	n := 0
	for cw.n < size {
		uri := fmt.Sprintf("http://site%d.example/%s/%d", r.IntN(200), []string{"img", "video", "doc", "page"}[r.IntN(4)], n)
		date := fmt.Sprintf("2026-03-%02dT%02d:%02d:%02dZ", 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
		req := fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: example\r\nUser-Agent: warctest\r\n\r\n", uri)
		if err := member(record("request", uri, date, req, "Content-Type: application/http; msgtype=request\r\n")); err != nil {
			return n, err
		}
		var payload []byte
		ctype := "text/html"
		if r.IntN(10) < 7 {
			payload = make([]byte, 5<<10+r.IntN(95<<10))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
			ctype = "image/jpeg"
		} else {
			var b bytes.Buffer
			for target := 5<<10 + r.IntN(45<<10); b.Len() < target; {
				b.WriteString(words[r.IntN(len(words))])
				b.WriteByte(' ')
			}
			payload = b.Bytes()
		}
		http := append(fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", ctype, len(payload)), payload...)
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
