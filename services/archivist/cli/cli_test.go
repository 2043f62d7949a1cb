package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestWrongUsageExitsTwoBeforeConnecting: an unknown command or flag, a
// missing or malformed argument is a usage error (exit status 2), said
// with the command's usage line, and found before the command reads its
// configuration or connects: NATS and every API point at a closed port
// and the configuration is malformed, yet each fails at once for its
// usage.
func TestWrongUsageExitsTwoBeforeConnecting(t *testing.T) {
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("ARCHIVIST_CURATOR_URL", "http://127.0.0.1:1")
	t.Setenv("DATABASE_MAX_CONNS", "not a number")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "archivist"`},
		{[]string{"batch", "bogus"}, `unknown command "bogus" for "archivist batch"`},
		{[]string{"batch", "status"}, "takes one batch id"},
		{[]string{"job", "requeue", "abc"}, `"abc" is not a job id`},
		{[]string{"batch", "submit", "--profile", "p"}, `required flag(s) "payload", "type" not set`},
		{[]string{"batch", "list", "--limit", "many"}, `invalid argument "many"`},
		{[]string{"work", "replay"}, "name an item or a filter"},
		{[]string{"work", "replay", "x1"}, `"x1" is not an item`},
		{[]string{"work", "replay", "--pipeline", "bus", "--confirm", "1", "--yes"}, "one of --dry-run, --confirm N and --yes"},
		{[]string{"work", "find", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"audit", "check"}, "takes one OBJECT or --space PREFIX"},
		{[]string{"audit", "close", "0"}, "is not a resolution task id"},
		{[]string{"key", "new", "x"}, "needs --role"},
		{[]string{"key", "new", "x", "--nats"}, "--nats needs --source"},
		{[]string{"cdx"}, "takes one FILE or more"},
		{[]string{"cdx", "--dialect", "warcio", "f.warc"}, "--dialect: pywb or cdxj-indexer"},
		{[]string{"locate", "--episode", "e.wav"}, `required flag(s) "clips" not set`},
		{[]string{"works", "show", "a:b", "--kind", "song"}, `--kind is episode or clip`},
		{[]string{"--nosuchflag"}, "unknown flag: --nosuchflag"},
	} {
		var out, errs bytes.Buffer
		start := time.Now()
		err := Run(context.Background(), c.args, &out, &errs)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("archivist %s: %v (exit %d), want a usage error with %q", strings.Join(c.args, " "), err, ExitCode(err), c.want)
			continue
		}
		if !strings.HasPrefix(errs.String(), "usage: archivist") {
			t.Errorf("archivist %s: stderr %q, want its usage line", strings.Join(c.args, " "), errs.String())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("archivist %s took %s: it tried to connect before checking its arguments", strings.Join(c.args, " "), d)
		}
	}
}

// TestGroupsListTheirCommands: a group's --help lists every subcommand,
// and alone it prints the same help and succeeds.
func TestGroupsListTheirCommands(t *testing.T) {
	for group, subs := range map[string][]string{
		"batch":      {"submit", "status", "list", "release", "delete", "update-reporting"},
		"job":        {"status", "list", "hold", "release", "requeue", "retry", "delete"},
		"collection": {"hold", "release"},
		"ingest":     {"pause", "resume", "cleanup", "transitions"},
		"research":   {"status", "release", "retry", "redo"},
		"audit":      {"status", "check", "parked", "resolutions", "close", "repair"},
		"index":      {"status", "reset", "retry"},
		"work":       {"find", "retry", "release", "hold", "skip", "park", "requeue", "replay", "delete", "resend", "actions", "rates"},
		"key":        {"new", "init", "token"},
		"profile":    {"list", "show", "set"},
		"object":     {"show", "withdraw", "reinstate"},
	} {
		for _, args := range [][]string{{group, "--help"}, {group}} {
			var out bytes.Buffer
			if err := Run(context.Background(), args, &out, &out); err != nil {
				t.Errorf("archivist %s: %v", strings.Join(args, " "), err)
				continue
			}
			for _, s := range subs {
				if !strings.Contains(out.String(), "\n  "+s+" ") {
					t.Errorf("archivist %s does not list %s:\n%s", strings.Join(args, " "), s, out.String())
				}
			}
		}
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"batch", "--help"}, &out, &out); err != nil || !strings.Contains(out.String(), "ARCHIVIST_CURATOR_URL") ||
		!strings.Contains(out.String(), "failed           -> update_reporting admin: update-reporting") {
		t.Errorf("batch --help names neither its environment nor the transition table: %v\n%s", err, out.String())
	}
}

// TestCompletionScripts: `archivist completion SHELL` prints a script
// that completes archivist's commands.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_archivist", "zsh": "#compdef archivist", "fish": "complete -c archivist"} {
		var out bytes.Buffer
		if err := Run(context.Background(), []string{"completion", shell}, &out, &out); err != nil || !strings.Contains(out.String(), want) {
			t.Errorf("completion %s: %v, want a script with %q (%d bytes)", shell, err, want, out.Len())
		}
	}
	// The completion itself: what follows "archivist ba" is batch.
	var out bytes.Buffer
	if err := Run(context.Background(), []string{cobra.ShellCompRequestCmd, "ba"}, &out, &out); err != nil || !strings.Contains(out.String(), "batch") {
		t.Errorf("completing \"ba\": %v %q", err, out.String())
	}
}

// TestEveryReadCommandPrintsJSON: each command that shows what a system
// holds has --json.
func TestEveryReadCommandPrintsJSON(t *testing.T) {
	root := newRoot(context.Background())
	for _, path := range [][]string{
		{"batch", "status"}, {"batch", "list"}, {"job", "status"}, {"job", "list"}, {"ingest", "transitions"},
		{"research", "status"}, {"works", "show"}, {"audit", "status"}, {"audit", "parked"}, {"audit", "resolutions"},
		{"index", "status"}, {"work", "find"}, {"work", "actions"}, {"work", "rates"}, {"locate"}, {"profile", "list"}, {"profile", "show"}, {"object", "show"},
	} {
		c, _, err := root.Find(path)
		if err != nil || c.Name() != path[len(path)-1] {
			t.Errorf("%v: no such command (%v)", path, err)
			continue
		}
		if c.Flags().Lookup("json") == nil {
			t.Errorf("archivist %s has no --json", strings.Join(path, " "))
		}
	}
}

// TestTransitionsAsJSON: the table the daemons read, as JSON.
func TestTransitionsAsJSON(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"ingest", "transitions", "--json"}, &out, &out); err != nil ||
		!strings.Contains(out.String(), `"From": "failed"`) || !strings.Contains(out.String(), `"Action": "requeue"`) {
		t.Errorf("ingest transitions --json: %v\n%.300s", err, out.String())
	}
}

// TestObjectWithdrawTakesTheVersionByFlag: `object withdraw` sends the ARK
// as given, a trailing "/v2" included (an ARK may contain "/": it was
// read as version 2 of another object), and the version only from
// --version; reinstate sends its ARK and reason.
func TestObjectWithdrawTakesTheVersionByFlag(t *testing.T) {
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		body["path"] = r.URL.Path
		got = append(got, body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/objects/reinstate" {
			fmt.Fprintf(w, `{"ark": %q, "versions": [{"version": 1}]}`, body["ark"])
			return
		}
		fmt.Fprintf(w, `{"ark": %q, "versions": [1], "deleted": [], "object": false}`, body["ark"])
	}))
	defer srv.Close()
	t.Setenv("ARCHIVIST_CURATOR_URL", srv.URL)
	t.Setenv("ARCHIVIST_TOKEN", "test")
	for _, args := range [][]string{
		{"object", "withdraw", "ark:/13030/book/v2", "--reason", "a takedown"},
		{"object", "withdraw", "ark:/13030/book", "--version", "3", "--reason", "a takedown"},
		{"object", "reinstate", "ark:/13030/book", "--reason", "cleared"},
	} {
		var out bytes.Buffer
		if err := Run(context.Background(), args, &out, &out); err != nil {
			t.Fatalf("archivist %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	if len(got) != 3 || got[0]["ark"] != "ark:/13030/book/v2" || got[0]["version"] != nil ||
		got[1]["ark"] != "ark:/13030/book" || got[1]["version"] != float64(3) ||
		got[2]["path"] != "/v1/objects/reinstate" || got[2]["reason"] != "cleared" {
		t.Errorf("requests: %v", got)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"object", "withdraw", "ark:/13030/book", "--version", "-1", "--reason", "x"}, &out, &out); ExitCode(err) != 2 {
		t.Errorf("--version -1: %v, want a usage error", err)
	}
}
