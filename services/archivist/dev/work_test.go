package dev_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/archivist/cli"
	"github.com/archivist/archivist/services/archivist/dev"
	"github.com/archivist/archivist/services/archivist/keycmd"
)

// demoWork shows #50 on the running demo: two depositors' batches fail
// (their payloads are gone) in two collections and two episodes park
// (their audio is no audio); `archivist work find` with a collection and a
// state lists exactly that collection's failures; a dry-run retry counts
// them, the retry with that count moves them, and the action is in the
// action log and in each job's history; a publisher's bulk retry touches
// only its own jobs; the parked episodes are released in one action.
func demoWork(t *testing.T, o dev.Options, operatorToken string) {
	ctx := context.Background()
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	keys := map[string]string{}
	for _, name := range []string{"maps", "films"} {
		var out strings.Builder
		if err := keycmd.NewKey(name, "publisher", name, name, "", &out); err != nil {
			t.Fatalf("archivist key new: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		keys[name] = strings.TrimSpace(lines[1])
		f, err := os.OpenFile(filepath.Join(o.DataDir, "api-keys"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, strings.TrimSpace(lines[3]))
		f.Close()
	}
	curator := "http://" + o.CuratorAddr
	ops := demoAPI{t: t, token: operatorToken}
	for name, key := range keys {
		api := demoAPI{t: t, token: key}
		api.waitFor("the key of "+name, func() bool { return api.call("GET", curator+"/v1/batches", nil, nil) == http.StatusOK })
		for i := range 2 {
			if code := api.call("POST", curator+"/v1/batches", map[string]string{"profile": name, "type": "file",
				"payload_url": fmt.Sprintf("%s/%s/%d.tif", gone.URL, name, i)}, nil); code != http.StatusCreated {
				t.Fatalf("%s submits: %d", name, code)
			}
		}
	}
	// Two episodes whose audio is not audio: the researcher parks them.
	bs, err := blob.NewLocal(filepath.Join(o.DataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		key := fmt.Sprintf("demo/audio/broken-%d.wav", i)
		if _, err := bs.Put(ctx, key, bytes.NewReader([]byte("RIFF, but no more of a WAV than this")), nil); err != nil {
			t.Fatal(err)
		}
		if code := ops.call("POST", curator+"/v1/episodes", map[string]any{"id": fmt.Sprintf("broken-%d", i), "title": "Broken",
			"media": map[string]string{"key": key, "sha256": ""}, "duration_ms": 20000, "priority": 5,
			"initial_curated_at": "2026-11-01T00:00:00Z", "latest_curated_at": "2026-11-01T00:00:00Z"}, nil); code != http.StatusAccepted {
			t.Fatalf("a broken episode: %d", code)
		}
	}

	// The CLI, as an operator runs it against the demo.
	t.Setenv("ARCHIVIST_CURATOR_URL", curator)
	t.Setenv("ARCHIVIST_PWA_URL", "http://"+o.PWAAddr)
	t.Setenv("ARCHIVIST_AUDITOR_URL", "http://"+o.AuditorAddr)
	t.Setenv("ARCHIVIST_INDEXER_URL", "http://"+o.IndexerAddr)
	t.Setenv("ARCHIVIST_TOKEN", operatorToken)
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := cli.Run(ctx, args, &out, &out); err != nil {
			t.Fatalf("archivist %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	find := func(args ...string) []work.Item {
		var p work.Page
		if err := json.Unmarshal([]byte(run(append([]string{"work", "find", "--json"}, args...)...)), &p); err != nil {
			t.Fatal(err)
		}
		return p.Items
	}
	ops.waitFor("4 failed jobs and 2 parked episodes", func() bool {
		return len(find("--kind", "job", "--state", "failed", "--query", "404")) == 4 && len(find("--pipeline", "research", "--state", "parked")) == 2
	})
	maps := find("--collection", "maps", "--state", "failed", "--kind", "job")
	if len(maps) != 2 {
		t.Fatalf("maps' failed jobs: %+v", maps)
	}
	for _, it := range maps {
		if it.Collection != "maps" || it.Submitter != "maps" || !slices.Contains(it.Verbs, work.Retry) || !strings.Contains(it.Reason, "404") {
			t.Errorf("maps' failed job %+v", it)
		}
	}
	table := run("work", "find", "--collection", "maps", "--state", "failed", "--kind", "job")
	for _, it := range maps {
		if !strings.Contains(table, it.Ref()) {
			t.Errorf("the table lacks %s:\n%s", it.Ref(), table)
		}
	}
	if strings.Contains(table, "films") {
		t.Errorf("films in maps' list:\n%s", table)
	}
	dry := run("work", "retry", "--collection", "maps", "--state", "failed", "--kind", "job")
	if !strings.Contains(dry, "retry would move 2 item(s): ingest/job 2") || !strings.Contains(dry, "--confirm 2") {
		t.Fatalf("the dry run:\n%s", dry)
	}
	var acts []work.Action
	if err := json.Unmarshal([]byte(run("work", "retry", "--collection", "maps", "--state", "failed", "--kind", "job", "--confirm", "2", "--json")), &acts); err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].Moved != 2 || acts[0].Outcome != "done" {
		t.Fatalf("the retry: %+v", acts)
	}
	var log []work.Action
	json.Unmarshal([]byte(run("work", "actions", "--json")), &log)
	if len(log) == 0 || log[0].ID != acts[0].ID || log[0].Counted != 2 || log[0].Filter.Collection != "maps" {
		t.Fatalf("the action log: %+v", log)
	}
	for _, it := range maps {
		var h struct {
			Events []struct{ What, Detail string }
		}
		ops.call("GET", curator+"/v1/ingest/history?job="+it.ID, nil, &h)
		found := false
		for _, e := range h.Events {
			found = found || strings.Contains(e.Detail, fmt.Sprintf("work action %d by ", acts[0].ID))
		}
		if !found {
			t.Errorf("job %s's history does not name the action: %+v", it.ID, h.Events)
		}
	}
	// A count that moved is refused: the retried jobs fail again (the
	// payload is still gone), so the dry run counts 2 again, and 3 is
	// refused.
	ops.waitFor("maps' jobs failed again", func() bool { return len(find("--collection", "maps", "--state", "failed", "--kind", "job")) == 2 })
	var stderr bytes.Buffer
	if err := cli.Run(ctx, []string{"work", "retry", "--collection", "maps", "--state", "failed", "--kind", "job", "--confirm", "3"}, &stderr, &stderr); err == nil ||
		!strings.Contains(err.Error(), "counted 3, now 2") {
		t.Errorf("a stale count: %v %s", err, stderr.String())
	}

	// The queues' flow: ingest's jobs came in and left in the last ten
	// minutes.
	if rates := run("work", "rates"); !strings.Contains(rates, "ingest/job") || !strings.Contains(rates, "DRAINS IN") {
		t.Errorf("work rates:\n%s", rates)
	}

	// A depositor's own page: its batches, none of another's.
	var mine string
	if code := (demoAPI{t: t, token: keys["films"]}).call("GET", "http://"+o.DashboardAddr+"/mine", nil, &mine); code != http.StatusOK ||
		!strings.Contains(mine, "the batches of films") || strings.Count(mine, "<td>films</td>") != 2 || strings.Contains(mine, "<td>maps</td>") {
		t.Errorf("films' page: %d\n%s", code, mine)
	}

	// The films publisher retries "everything failed": only its own jobs.
	t.Setenv("ARCHIVIST_TOKEN", keys["films"])
	out := run("work", "retry", "--state", "failed", "--kind", "job", "--yes")
	if !strings.Contains(out, "retry moved 2 item(s)") {
		t.Errorf("films' retry:\n%s", out)
	}
	t.Setenv("ARCHIVIST_TOKEN", operatorToken)
	if n := len(find("--collection", "maps", "--state", "failed", "--kind", "job")); n != 2 {
		t.Errorf("films' retry moved maps' jobs: %d of maps' left failed", n)
	}

	// The parked episodes, released in one action, with the reason shown.
	parked := find("--pipeline", "research", "--state", "parked")
	if !strings.Contains(parked[0].Reason, "audio") {
		t.Errorf("a parked episode's reason: %q", parked[0].Reason)
	}
	out = run("work", "release", "--pipeline", "research", "--state", "parked", "--yes")
	if !strings.Contains(out, "release moved 2 item(s)") {
		t.Errorf("the release:\n%s", out)
	}
	t.Logf("demo: work find listed maps' 2 failed jobs; the dry run counted 2, the retry (action %d) moved 2; films' key retried only its 2; 2 parked episodes released\n%s", acts[0].ID, table)
}
