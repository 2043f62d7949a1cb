package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/services/archivist/cli"

	"github.com/archivist/archivist/devkit/testenv"
)

// TestCDXCommandMatchesPywb: `archivist cdx --sort` and `--cdxj --sort`
// write what pywb's cdx-indexer -s (-j) writes.
func TestCDXCommandMatchesPywb(t *testing.T) {
	td := testenv.SharedData(t, "warc", "archivist cdx --sort writes what pywb's cdx-indexer -s writes")
	warcs := filepath.Join(td, "pywb", "sample_archive", "warcs")
	ref := filepath.Join(td, "reference", "pywb", "sample_archive", "warcs")
	for _, c := range []struct{ file, flag, ext string }{
		{"iana.warc.gz", "", ".pywb.cdx"}, {"iana.warc.gz", "--cdxj", ".pywb.cdxj"},
		{"example.arc", "", ".pywb.cdx"}, {"dupes.warc.gz", "--cdxj", ".pywb.cdxj"},
	} {
		args := []string{"cdx", "--sort"}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		var out, errs bytes.Buffer
		if err := run(context.Background(), append(args, filepath.Join(warcs, c.file)), &out, &errs); err != nil {
			t.Fatalf("%s: %v %s", c.file, err, errs.String())
		}
		want, err := os.ReadFile(filepath.Join(ref, c.file+c.ext))
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != string(want) {
			t.Errorf("%s %s differs from pywb", c.file, c.flag)
		}
	}
	// --dialect cdxj-indexer: what webrecorder's cdxj-indexer wrote (in
	// file order; --sort sorts it).
	for _, c := range []struct{ file, flag, ext string }{
		{"iana.warc.gz", "--cdxj", ".cdxj-indexer.cdxj"}, {"example.arc", "", ".cdxj-indexer.cdx"}, {"dupes.warc.gz", "--cdxj", ".cdxj-indexer.cdxj"},
	} {
		args := []string{"cdx", "--sort", "--dialect", "cdxj-indexer"}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		var out, errs bytes.Buffer
		if err := run(context.Background(), append(args, filepath.Join(warcs, c.file)), &out, &errs); err != nil {
			t.Fatalf("%s: %v %s", c.file, err, errs.String())
		}
		raw, err := os.ReadFile(filepath.Join(ref, c.file+c.ext))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		slices.Sort(want)
		got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		if !slices.Equal(got, want) || len(want) < 2 {
			t.Errorf("%s %s --dialect cdxj-indexer differs from cdxj-indexer: %d lines, want %d", c.file, c.flag, len(got), len(want))
		}
	}
	// A broken file: its lines up to the fault, the reason, a failure.
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"cdx", filepath.Join(td, "warcio", "test", "data", "example-wrong-chunks.warc.gz")}, &out, &errs)
	if err == nil || !strings.Contains(errs.String(), "truncated record") || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("broken file: err %v, stderr %q, stdout %q", err, errs.String(), out.String())
	}
}

// TestBlobPut: `archivist blob put KEY FILE` stores the file under KEY in
// BLOB_URL's store, stating its sha256; a wrong usage says how.
func TestBlobPut(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BLOB_URL", "file://"+dir)
	src := filepath.Join(t.TempDir(), "in.warc")
	if err := os.WriteFile(src, []byte("WARC/1.0\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"blob", "put", "warcs/in.warc", src}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "warcs/in.warc 10 sha256:") {
		t.Errorf("printed %q", out.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "warcs", "in.warc")); err != nil || string(b) != "WARC/1.0\r\n" {
		t.Errorf("stored %q %v", b, err)
	}
	if err := run(context.Background(), []string{"blob", "get", "x"}, io.Discard, io.Discard); !cli.IsUsage(err) || !strings.Contains(err.Error(), `unknown command "get" for "archivist blob"`) {
		t.Errorf("a wrong usage: %v", err)
	}
}
