package dev

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest/origin"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// demo seeds a running system with a little of everything, so that a
// newcomer sees every pipeline move within a minute: three jingles and two
// episodes of synthesized audio that hold them (researched), three batches
// from an origin on this machine (ingested, then audited: three files; two
// books each with a cover.jpg; two volumes whose manifests are both
// manifest.checkm), and
// two WARC files (indexed and answered by the CDX API). It waits for the
// system to be ready first, and reports what it did to out.
type demo struct {
	blobs   blob.Store
	token   string
	admin   string
	curator string
	auditor string
	out     io.Writer
}

func (d *demo) run(ctx context.Context) error {
	if err := d.waitReady(ctx); err != nil {
		return err
	}
	const rate = 8000
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	record := func(kind, id string, wav []byte, ms int) error {
		key := "demo/audio/" + id + ".wav"
		if _, err := d.blobs.Put(ctx, key, bytes.NewReader(wav), nil); err != nil {
			return err
		}
		sum := sha256.Sum256(wav)
		return d.post(ctx, d.curator+"/v1/"+kind+"s", map[string]any{"id": id, "title": "Demo " + id,
			"media": map[string]string{"key": key, "sha256": hex.EncodeToString(sum[:])}, "duration_ms": ms, "priority": 0,
			"initial_curated_at": at, "latest_curated_at": at}, http.StatusAccepted)
	}
	for i := range 3 {
		if err := record("clip", fmt.Sprintf("demo-jingle-%d", i), locatetest.WAV(locatetest.Jingle(uint64(i+1), 2, rate), rate), 2000); err != nil {
			return fmt.Errorf("demo clip: %w", err)
		}
	}
	for i := range 2 {
		ep := locatetest.Bed(uint64(500+i), 20, rate)
		locatetest.Insert(ep, locatetest.Jingle(uint64(i+1), 2, rate), 5*rate, 0.8)
		locatetest.Insert(ep, locatetest.Jingle(3, 2, rate), 14*rate, 0.8)
		if err := record("episode", fmt.Sprintf("demo-episode-%d", i), locatetest.WAV(ep, rate), 20000); err != nil {
			return fmt.Errorf("demo episode: %w", err)
		}
	}
	fmt.Fprintln(d.out, "demo: 2 episodes and 3 jingles curated (archivist research status)")

	origin, err := d.origin(ctx)
	if err != nil {
		return err
	}
	if err := d.post(ctx, d.curator+"/v1/batches", map[string]string{"submitter": "demo", "profile": "demo",
		"payload_url": origin + "/demo.checkm", "type": "batch-manifest"}, http.StatusCreated, http.StatusOK); err != nil {
		return fmt.Errorf("demo batch: %w", err)
	}
	fmt.Fprintln(d.out, "demo: a batch of 3 files submitted (archivist batch list)")
	// Real batches repeat names across objects: every book its cover.jpg,
	// every volume's manifest its manifest.checkm.
	for _, b := range []struct{ path, kind, what string }{
		{"/demo-covers.checkm", "batch-manifest", "a batch of 2 objects, each with a cover.jpg"},
		{"/demo-volumes.checkm", "manifest-of-manifests", "a manifest of 2 volumes' manifests, each named manifest.checkm"},
	} {
		if err := d.post(ctx, d.curator+"/v1/batches", map[string]string{"submitter": "demo", "profile": "demo",
			"payload_url": origin + b.path, "type": b.kind}, http.StatusCreated, http.StatusOK); err != nil {
			return fmt.Errorf("demo batch %s: %w", b.path, err)
		}
		fmt.Fprintln(d.out, "demo: "+b.what+" submitted")
	}

	for i, host := range []string{"www.demo.example", "blog.demo.example"} {
		if _, err := d.blobs.Put(ctx, fmt.Sprintf("warcs/demo-%d.warc.gz", i), bytes.NewReader(warctest.Gzipped(host, 5)), nil); err != nil {
			return fmt.Errorf("demo WARC: %w", err)
		}
	}
	fmt.Fprintln(d.out, "demo: 2 WARC files dropped into warcs/ (archivist index status; /cdx?url=www.demo.example/p/1)")

	// Once the batch is stored, its objects are checked at once (rather
	// than at their place in the 30-day cycle).
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var done []json.RawMessage
		err := apiclient.DoAs(ctx, http.DefaultClient, d.token, "curator", http.MethodGet, d.curator+"/v1/batches?state=completed&limit=1", nil, &done)
		if err == nil && len(done) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo audit: the batch did not complete within 2 minutes (archivist batch list): %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err := d.post(ctx, d.auditor+"/v1/audit/check", map[string]string{"space": "objects/"}, http.StatusAccepted); err != nil {
		return fmt.Errorf("demo audit: %w", err)
	}
	fmt.Fprintln(d.out, "demo: the batch's objects checked (archivist audit status); the dashboard shows it all")
	return nil
}

// waitReady waits for the admin server's /readyz.
func (d *demo) waitReady(ctx context.Context) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.admin+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// post sends body as JSON with the operator's key, retrying for half a
// minute, and wants one of codes.
func (d *demo) post(ctx context.Context, url string, body any, codes ...int) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			for _, c := range codes {
				if resp.StatusCode == c {
					return nil
				}
			}
			err = fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(msg)))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// origin serves the demo batch's manifest and files on this machine until
// ctx ends, and returns its URL.
func (d *demo) origin(ctx context.Context) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	base := "http://" + ln.Addr().String()
	o := origin.New(nil)
	var files []origin.File
	for name, body := range map[string][]byte{
		"notes.txt":  []byte("Demo batch: notes of a programme.\n"),
		"script.txt": []byte(strings.Repeat("The script of the programme. ", 40)),
		"rights.txt": []byte("Rights: demo material, no rights reserved.\n"),
	} {
		files = append(files, origin.File{Path: "/files/" + name, Name: name, LocalID: "demo-" + strings.TrimSuffix(name, ".txt"), Body: body})
	}
	o.AddBatch(base, "/demo.checkm", files)
	cover := func(of string) []byte { return []byte("a cover of " + of + "\n") }
	o.AddBatch(base, "/demo-covers.checkm", []origin.File{
		{Path: "/covers/book-1/cover.jpg", Name: "cover.jpg", LocalID: "demo-book-1", Body: cover("book 1")},
		{Path: "/covers/book-2/cover.jpg", Name: "cover.jpg", LocalID: "demo-book-2", Body: cover("book 2")},
	})
	var volumes []origin.Object
	for _, v := range []string{"vol-1", "vol-2"} {
		volumes = append(volumes, origin.Object{ManifestPath: "/volumes/" + v + "/manifest.checkm", LocalID: "demo-" + v, Files: []origin.File{
			{Path: "/volumes/" + v + "/cover.jpg", Name: "cover.jpg", Body: cover(v)},
			{Path: "/volumes/" + v + "/text.txt", Name: "text.txt", Body: []byte("The text of " + v + ".\n")},
		}})
	}
	o.AddManifestOfManifests(base, "/demo-volumes.checkm", volumes)
	srv := &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	go func() { <-ctx.Done(); srv.Close() }()
	return base, nil
}
