// Package warctest makes WARC files for tests: small, valid, each record a
// gzip member of its own, as crawlers write them.
package warctest

import (
	"bytes"
	"compress/gzip"
	"fmt"
)

// Gzipped is a WARC file of pages response records of host (URLs
// http://HOST/p/0, /p/1, ...; dates in March 2026), each record a gzip
// member of its own.
func Gzipped(host string, pages int) []byte {
	var out bytes.Buffer
	for i := range pages {
		body := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>%d</p>", i)
		rec := fmt.Sprintf("WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://%s/p/%d\r\nWARC-Date: 2026-03-0%dT00:00:00Z\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			host, i, 1+i%9, len(body), body)
		w := gzip.NewWriter(&out)
		w.Write([]byte(rec))
		w.Close()
	}
	return out.Bytes()
}
