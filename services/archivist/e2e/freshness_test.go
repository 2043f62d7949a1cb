package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	aggmigrations "github.com/archivist/archivist/services/aggregator/migrations"
	"github.com/archivist/archivist/services/indexer/indexer"
	indexermigrations "github.com/archivist/archivist/services/indexer/migrations"
)

// bigWARC is a WARC gzipped at level of about size bytes: HTML responses of 8-24 KiB
// of random words (compressing about as real pages do), one gzip member each.
// It returns the file and the URL of its last record.
func bigWARC(host string, size, level int) ([]byte, string) {
	rng := rand.New(rand.NewPCG(1, uint64(len(host))))
	words := strings.Fields("archive wayback crawl harvest page index record capture replay surt digest offset member length html body script style link image video audio text")
	// Pages are slices of one pool of random words at random offsets: as
	// compressible as real pages, and cheap to make under the race detector.
	var pool bytes.Buffer
	for pool.Len() < 1<<20 {
		pool.WriteString(words[rng.IntN(len(words))])
		fmt.Fprintf(&pool, "%d ", rng.IntN(100000))
	}
	var out bytes.Buffer
	var page bytes.Buffer
	last := ""
	for i := 0; out.Len() < size; i++ {
		page.Reset()
		page.WriteString("<html><body>")
		n := 8<<10 + rng.IntN(16<<10)
		off := rng.IntN(pool.Len() - n)
		page.Write(pool.Bytes()[off : off+n])
		page.WriteString("</body></html>")
		body := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", page.Len(), page.Bytes())
		last = fmt.Sprintf("http://%s/p/%d", host, i)
		rec := fmt.Sprintf("WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:%08d-0000-0000-0000-000000000000>\r\nWARC-Target-URI: %s\r\nWARC-Date: 2026-03-01T00:00:00Z\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			i, last, len(body), body)
		w, _ := gzip.NewWriterLevel(&out, level)
		w.Write([]byte(rec))
		w.Close()
	}
	return out.Bytes(), last
}

// BenchmarkFreshness100MBWARC measures the time from a 100 MB WARC landing
// in the repository (stored, and recorded on the bus as ingest records it)
// to its last URL answering from the CDX API, with the services' default
// intervals. In the same run it times a plain gunzip of the same file, the
// floor of any indexer; freshness/gunzip says how much the pipeline adds.
func BenchmarkFreshness100MBWARC(b *testing.B) {
	ctx := context.Background()
	bs, err := blob.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	natsURL := testenv.NATS(b)
	testenv.StartServiceIn(b, indexer.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(b, indexermigrations.Schema), Blob: bs},
		map[string]string{"INDEXER_HTTP_ADDR": "127.0.0.1:0", "INDEXER_REPOSITORY_PREFIX": "warcs/"})
	port := testenv.FreePort(b)
	testenv.StartServiceIn(b, aggregator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(b, aggmigrations.Schema), Blob: bs},
		map[string]string{"AGGREGATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port)})
	ingest := testenv.BusAt(b, natsURL, "curator")

	var fresh, gunzip time.Duration
	var size int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		file, last := bigWARC(fmt.Sprintf("site%d.example.com", i), 100<<20, gzip.DefaultCompression)
		size += int64(len(file))
		t0 := time.Now()
		zr, err := gzip.NewReader(bytes.NewReader(file))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			b.Fatal(err)
		}
		gunzip += time.Since(t0)
		b.StartTimer()

		start := time.Now()
		name := fmt.Sprintf("warcs/big-%d.warc.gz", i)
		if _, err := bs.Put(ctx, name, bytes.NewReader(file), nil); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ingest.PublishEvent(ctx, &events.ObjectRecorded{Object: name, SHA256: strings.Repeat("0", 64), Size: int64(len(file))}); err != nil {
			b.Fatal(err)
		}
		q := fmt.Sprintf("http://127.0.0.1:%d/cdx?url=%s", port, last)
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
			if answered(q) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s never answered", last)
			}
		}
		fresh += time.Since(start)
	}
	b.ReportMetric(fresh.Seconds()/float64(b.N), "s-fresh/file")
	b.ReportMetric(gunzip.Seconds()/float64(b.N), "s-gunzip/file")
	b.ReportMetric(float64(size)/float64(b.N)/1e6, "MB/file")
	b.ReportMetric(fresh.Seconds()/gunzip.Seconds(), "fresh/gunzip")
}

func answered(q string) bool {
	resp, err := http.Get(q)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == 200 && len(body) > 0
}
