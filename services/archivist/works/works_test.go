package works_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/archivist/works"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/curator"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func post(t *testing.T, base, body string) {
	t.Helper()
	resp, err := http.Post(base+"/v1/episodes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %d", body, resp.StatusCode)
	}
}

// TestWorksShow runs a real curator, links two records from two sources,
// and checks what `archivist works show` prints for the one merged away.
func TestWorksShow(t *testing.T) {
	port := testenv.FreePort(t)
	testenv.StartService(t, curator.Definition(), map[string]string{
		"CURATOR_HTTP_ADDR":         fmt.Sprintf("127.0.0.1:%d", port),
		"CURATOR_SOURCE_PRECEDENCE": "station-log,feed",
		// The station log is the archive's own catalogue: its links to
		// the feed's records count without a link back.
		"CURATOR_TRUSTED_LINKERS": "station-log",
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	post(t, base, `{"id":"ep1","source":"feed","title":"From the feed","media":{"key":"audio/feed/ep1.mp3","sha256":""},
		"duration_ms":60000,"priority":2,"initial_curated_at":"2026-01-01T00:00:00Z","latest_curated_at":"2026-01-01T00:00:00Z"}`)
	post(t, base, `{"id":"2026-01-01","source":"station-log","title":"Station log title","media":{"key":"audio/log/0101.mp3","sha256":""},
		"duration_ms":61000,"priority":7,"same_as":[{"source":"feed","id":"ep1"}],
		"initial_curated_at":"2025-12-31T00:00:00Z","latest_curated_at":"2026-01-02T00:00:00Z"}`)

	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := works.Fetch(ctx, base, "episode", "station-log:2026-01-01")
		// Both records stored and merged (the two events may be handled in
		// either order: until the feed's record is stored, the work is headed
		// by the station log's).
		if err == nil && v.Work != nil && v.Work.Key == "feed:ep1" && len(v.Sources) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two records were never merged: %+v %v", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	v, err := works.Fetch(ctx, base, "episode", "station-log:2026-01-01")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := works.Print(&out, v); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"station-log:2026-01-01 was merged into feed:ep1", // the work is headed by the smallest key
		"title     Station log title",                     // title and media from the preferred source
		"audio/log/0101.mp3",
		"priority 7", // the highest priority
		"curated   2025-12-31T00:00:00Z  to 2026-01-02T00:00:00Z",
		"feed:ep1",
		"REDIRECT",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// `archivist works explain`: each field's record and rule, the link.
	e, err := works.FetchExplained(ctx, base, "episode", "station-log:2026-01-01", time.Time{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := works.PrintExplained(&out, e); err != nil {
		t.Fatal(err)
	}
	text = out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"episode feed:ep1",
		"station-log, feed",
		"Station log title     station-log:2026-01-01", // the title, from the preferred source's record
		"the first non-empty title in source precedence",
		"7                     station-log:2026-01-01  ", // the highest priority, and whose
		"station-log:2026-01-01  feed:ep1",               // the trusted link
		"SINCE version",
		"nothing changed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explain output lacks %q:\n%s", want, text)
		}
	}
	// `archivist works split`: recorded, printed, in force.
	d, err := works.Decide(ctx, base, "episode", api.DecisionRequest{Action: "split", A: "feed:ep1", Reason: "a different episode"})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	works.PrintDecision(&out, d)
	if text := out.String(); !strings.Contains(text, "episode feed:ep1: split, decision ") || !strings.Contains(text, " by anonymous at ") || !strings.Contains(text, "(a different episode)") {
		t.Errorf("split printed as %q", text)
	}
	testenv.Eventually(t, 15*time.Second, "feed:ep1 split out", func() bool {
		v, err := works.Fetch(ctx, base, "episode", "station-log:2026-01-01")
		return err == nil && v.Work != nil && len(v.Work.Members) == 1
	})
	if _, err := works.Decide(ctx, base, "episode", api.DecisionRequest{Action: "split", A: "feed:ep1"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a split without a reason: %v, want a 400", err)
	}
	if _, err := works.Fetch(ctx, base, "episode", "nobody:nothing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := works.Fetch(ctx, base, "podcast", "x:y"); err == nil {
		t.Error("bad kind accepted")
	}
}
