package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/archivist/all"
	"github.com/archivist/archivist/services/archivist/cli"
	"github.com/archivist/archivist/services/archivist/dev"
)

// TestREADMEDocumentsEveryVariable keeps the README's configuration table
// complete: every environment variable a process reads is in it, with its
// default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(readme)
	cfgs := []any{&service.Common{}, &logging.Config{}, &dev.Options{}}
	for _, d := range all.Services() {
		if d.Config == nil {
			t.Errorf("service %s's definition names no Config: its variables are in no reference", d.Name)
			continue
		}
		cfgs = append(cfgs, d.Config)
	}
	for _, cfg := range cfgs {
		for _, v := range config.Vars(cfg) {
			row := "| `" + v.Name + "` | "
			i := strings.Index(table, row)
			if i < 0 {
				t.Errorf("README's configuration table lacks %s", v.Name)
				continue
			}
			if v.Default != "" && !strings.Contains(strings.SplitN(table[i:], "\n", 2)[0], "`"+v.Default+"`") {
				t.Errorf("README gives %s a default other than %q", v.Name, v.Default)
			}
		}
	}
}

// TestEveryCommandHasHelp: -h and --help on every command and subcommand
// print its help and succeed, with no running system (NATS_URL and the
// APIs point nowhere) and whatever the environment holds; --version
// prints the version; an unknown command is a wrong usage.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("DATABASE_MAX_CONNS", "not a number")
	for _, args := range [][]string{
		{"dev"}, {"migrate"}, {"research"}, {"research", "status"}, {"audit"}, {"audit", "check"}, {"key", "new"},
		{"index"}, {"index", "status"}, {"cdx"}, {"batch"}, {"batch", "submit"}, {"batch", "status"}, {"job", "status"},
		{"collection"}, {"ingest"}, {"locate"}, {"work"}, {"work", "find"}, {"work", "replay"}, {"work", "delete"}, {"works", "show"}, {"blob", "put"}, {"nats-auth"},
	} {
		for _, h := range []string{"-h", "--help"} {
			var out, errs bytes.Buffer
			if err := run(context.Background(), append(append([]string{}, args...), h), &out, &errs); err != nil {
				t.Errorf("archivist %s %s: %v (%s)", strings.Join(args, " "), h, err, errs.String())
				continue
			}
			if !strings.Contains(out.String(), "Usage:\n  archivist "+strings.Join(args, " ")) {
				t.Errorf("archivist %s %s printed %q", strings.Join(args, " "), h, out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "archivist ") {
		t.Errorf("--version: %q %v", out.String(), err)
	}
	if err := run(context.Background(), []string{"nosuch", "-h"}, io.Discard, io.Discard); !cli.IsUsage(err) {
		t.Errorf("help of an unknown command: %v, want a usage error", err)
	}
}
