package dev_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/indexer/warc/warctest"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// blobOutage is how long the store's root is gone: the 70 s, longer
// than any retry budget a quick loop would spend in that time.
const blobOutage = 70 * time.Second

// TestDevBlobStoreOutage: in `archivist dev`, the blob store's root goes
// (an unmounted volume) for 70 s while 5 WARC files wait to be indexed and
// an episode waits to be researched against two clips. Nothing is failed,
// waiting or parked for it: once the root is back every WARC is answered
// by the CDX API and the episode is complete with all its results.
func TestDevBlobStoreOutage(t *testing.T) {
	o := devOptions(t)
	stop, out := runDev(t, o)
	defer stop()
	call := apiCaller(t, o)
	ctx := context.Background()
	root := filepath.Join(o.DataDir, "blobs")
	bs, err := blob.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	const rate = 8000
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	record := func(kind, id string, wav []byte, ms int) {
		key := "outage/" + id + ".wav"
		if _, err := bs.Put(ctx, key, bytes.NewReader(wav), nil); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(wav)
		if code, err := call(http.MethodPost, "http://"+o.CuratorAddr+"/v1/"+kind+"s", map[string]any{"id": id, "title": id,
			"media": map[string]string{"key": key, "sha256": hex.EncodeToString(sum[:])}, "duration_ms": ms, "priority": 0,
			"initial_curated_at": at, "latest_curated_at": at}, nil); err != nil || code != http.StatusAccepted {
			t.Fatalf("post %s: %d %v", id, code, err)
		}
	}
	for i := range 2 {
		record("clip", fmt.Sprintf("jingle-%d", i), locatetest.WAV(locatetest.Jingle(uint64(i+1), 2, rate), rate), 2000)
	}
	hosts := []string{}
	for i := range 5 {
		host := fmt.Sprintf("h%d.outage.example", i)
		if _, err := bs.Put(ctx, fmt.Sprintf("warcs/outage-%d.warc.gz", i), bytes.NewReader(warctest.Gzipped(host, 3)), nil); err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, host)
	}
	ep := locatetest.Bed(900, 60, rate)
	locatetest.Insert(ep, locatetest.Jingle(1, 2, rate), 10*rate, 0.8)
	locatetest.Insert(ep, locatetest.Jingle(2, 2, rate), 40*rate, 0.8)
	record("episode", "outage-episode", locatetest.WAV(ep, rate), 60000)

	// The root goes at once: the files wait, the episode's research meets it.
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(blobOutage)
	var research struct {
		Episodes struct {
			Complete        int `json:"complete"`
			Parked          int `json:"parked"`
			WithFailedClips int `json:"with_failed_clips"`
		} `json:"episodes"`
		Retrying []any `json:"retrying"`
		Results  int   `json:"results"`
	}
	var index struct {
		ByStatus map[string]int `json:"by_status"`
	}
	call(http.MethodGet, "http://"+o.PWAAddr+"/v1/research/status", nil, &research)
	call(http.MethodGet, "http://"+o.IndexerAddr+"/v1/index/status", nil, &index)
	if research.Episodes.Parked+research.Episodes.WithFailedClips+len(research.Retrying) != 0 || index.ByStatus["parked"]+index.ByStatus["failed"] != 0 {
		t.Fatalf("during the outage: research %+v, index %v: want nothing parked, failed or retrying", research, index.ByStatus)
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(3 * time.Minute)
	for {
		researched := false
		if code, err := call(http.MethodGet, "http://"+o.PWAAddr+"/v1/research/status", nil, &research); err == nil && code == 200 {
			researched = research.Episodes.Complete == 1 && research.Results == 2
		}
		answered := 0
		for _, h := range hosts {
			var cdx string
			if code, _ := call(http.MethodGet, "http://"+o.AggregatorAddr+"/cdx?url="+h+"/p/1", nil, &cdx); code == 200 && strings.Contains(cdx, h) {
				answered++
			}
		}
		if researched && answered == len(hosts) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 min after the root came back: research %+v, %d of %d WARC files answered\n%s", research, answered, len(hosts), out)
		}
		time.Sleep(time.Second)
	}
	call(http.MethodGet, "http://"+o.IndexerAddr+"/v1/index/status", nil, &index)
	if research.Episodes.Parked+research.Episodes.WithFailedClips+len(research.Retrying) != 0 || index.ByStatus["parked"]+index.ByStatus["failed"] != 0 {
		t.Errorf("after the outage: research %+v, index %v: want nothing parked, failed or retrying", research, index.ByStatus)
	}
}
