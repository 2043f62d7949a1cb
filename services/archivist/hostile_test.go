package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestToolsAnswerHostileFilesWithAnError: `archivist cdx` and `archivist
// locate` given hostile files, as a new user might, answer with an error
// naming what is wrong, at once and in bounded memory.
func TestToolsAnswerHostileFilesWithAnError(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	longLine := write("long.warc", append([]byte("WARC/1.0\r\nWARC-Type: response\r\nX: "), bytes.Repeat([]byte("a"), 8<<20)...))
	bigBlock := write("big.warc", []byte("WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://a/\r\nContent-Length: 1073741824\r\n\r\nshort"))

	wav := append(locatetest.WAVHeader(65535, 8000, 16, 16), make([]byte, 16)...)
	hostileEpisode := write("episode.wav", wav)
	clips := filepath.Join(dir, "clips")
	os.Mkdir(clips, 0o755)
	good := locatetest.WAV(locatetest.Jingle(1, 3, 22050), 22050)
	os.WriteFile(filepath.Join(clips, "good.wav"), good, 0o644)
	os.WriteFile(filepath.Join(clips, "ogg.ogg"), append([]byte("OggS\x00\x02"), make([]byte, 21)...), 0o644)
	goodEpisode := write("good-episode.wav", good)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cdx", longLine}, "longer than 65536 bytes (MaxLine)"},
		{[]string{"cdx", bigBlock}, "truncated record"},
		{[]string{"locate", "--episode", hostileEpisode, "--clips", clips}, "channels 65535 is beyond the limit"},
		{[]string{"locate", "--episode", goodEpisode, "--clips", clips}, "1 of 2 clips could not be read"},
	} {
		var out, errs bytes.Buffer
		var err error
		start := time.Now()
		heap := testenv.PeakHeap(func() { err = run(context.Background(), c.args, &out, &errs) })
		t.Logf("%s: %v (%s, peak heap %d MiB)", strings.Join(c.args[:1], " "), err, time.Since(start).Round(time.Millisecond), heap>>20)
		if err == nil || !strings.Contains(err.Error()+errs.String(), c.want) {
			t.Errorf("%v: err %v, stderr %q, want %q", c.args, err, errs.String(), c.want)
		}
		if heap > 64<<20 {
			t.Errorf("%v: peak heap %d MiB", c.args, heap>>20)
		}
	}
}
