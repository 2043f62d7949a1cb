package curator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/curator"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type harness struct {
	api  string
	bus  *bus.Bus
	cat  *catalog.Catalog
	stop func()
}

// start runs the curator service as its main would, against the test's own
// NATS account and database.
func start(t *testing.T) *harness {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with more of the curator's environment.
func startWith(t *testing.T, env map[string]string) *harness {
	t.Helper()
	port := testenv.FreePort(t)
	e := map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port)}
	for k, v := range env {
		e[k] = v
	}
	svc := testenv.StartService(t, curator.Definition(), e)
	h := &harness{api: fmt.Sprintf("http://127.0.0.1:%d", port), bus: testenv.BusAt(t, svc.NATSURL, "test-upstream"), stop: svc.Stop}
	// The test reads the service's own database.
	pool, err := store.Open(context.Background(), store.Config{URL: svc.DBURL, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h.cat = catalog.New(pool, nil, testenv.Logger(t))
	return h
}

// subjectOf is the subject env is published on: its source's (the
// payload's, or its producer when it names none).
func subjectOf(env events.Envelope) string {
	var a events.CuratedAudio
	_ = msgpack.Unmarshal(env.Payload, &a)
	if a.Source == "" {
		a.Source = env.Producer
	}
	return events.CurationSubject(a.Source, env.Type)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, what, cond)
}

func episode(id, title string) *events.EpisodeUpserted {
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	return &events.EpisodeUpserted{ID: id, Title: title, Media: events.Media{Key: "audio/" + id + ".mp3"},
		DurationMS: 1800000, Priority: 3, InitialCuratedAt: at, LatestCuratedAt: at}
}

func (h *harness) waitRecord(t *testing.T, k catalog.Kind, id string, cond func(catalog.Record) bool) catalog.Record {
	t.Helper()
	var rec catalog.Record
	waitFor(t, fmt.Sprintf("%s %s in PostgreSQL", k, id), func() bool {
		r, err := h.cat.Get(context.Background(), k, id)
		if err != nil {
			return false
		}
		rec = r
		return cond(r)
	})
	return rec
}

func TestEventsFromNATSReachPostgreSQLVersioned(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	older, err := events.NewAt("upstream", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), episode("ep-1", "older title"))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := events.NewAt("upstream", time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), episode("ep-1", "newer title"))
	if err != nil {
		t.Fatal(err)
	}
	// Newer first, then older: the older must not win.
	if _, err := h.bus.Publish(ctx, subjectOf(newer), newer); err != nil {
		t.Fatal(err)
	}
	h.waitRecord(t, catalog.Episode, "upstream:ep-1", func(r catalog.Record) bool { return r.Title == "newer title" })
	if _, err := h.bus.Publish(ctx, subjectOf(older), older); err != nil {
		t.Fatal(err)
	}
	clip := &events.ClipUpserted{ID: "clip-1", Title: "jingle", Media: events.Media{Key: "clips/jingle.flac"},
		DurationMS: 4000, InitialCuratedAt: newer.SentAt, LatestCuratedAt: newer.SentAt}
	if _, _, err := h.bus.PublishEvent(ctx, clip); err != nil {
		t.Fatal(err)
	}
	// The clip was published after the older episode; once it is stored the
	// older episode has been handled too (one stream, in order per consumer
	// is not guaranteed, so wait on the consumer instead).
	h.waitRecord(t, catalog.Clip, "test-upstream:clip-1", func(catalog.Record) bool { return true })
	cons, _ := h.bus.JetStream().Consumer(ctx, events.StreamCuration, events.CuratorEpisodes.Config.Durable)
	waitFor(t, "episode consumer drained", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	rec, _ := h.cat.Get(ctx, catalog.Episode, "upstream:ep-1")
	if rec.Title != "newer title" || !rec.Version.Equal(newer.SentAt) || rec.EventID != newer.ID {
		t.Errorf("stored %+v, want the newer event", rec)
	}
}

func TestGarbageOnTheBusIsDeadLettered(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	m := nats.NewMsg(events.CurationSubject("upstream", events.TypeClipUpserted))
	m.Data = []byte("garbage")
	if _, err := h.bus.JetStream().PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	bad, _ := events.New("upstream", &events.ClipUpserted{ID: "has space", Media: events.Media{Key: "k"}})
	if _, err := h.bus.Publish(ctx, subjectOf(bad), bad); err != nil {
		t.Fatal(err)
	}
	st, _ := h.bus.JetStream().Stream(ctx, events.StreamDeadLetter)
	waitFor(t, "two dead letters", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 2
	})
	reasons := ""
	for seq := uint64(1); seq <= 2; seq++ {
		msg, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		reasons += msg.Header.Get(events.HeaderDLQReason) + "\n"
	}
	if !strings.Contains(reasons, "undecodable") || !strings.Contains(reasons, "id: must not contain whitespace") {
		t.Errorf("reasons:\n%s", reasons)
	}
}

func post(t *testing.T, url, contentType string, body []byte, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("response %d is not JSON: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func TestHTTPPostsReachPostgreSQL(t *testing.T) {
	h := start(t)
	body := `{"id":"ep-http","title":"Posted","media":{"key":"audio/ep-http.mp3","sha256":""},"duration_ms":60000,
		"priority":9,"initial_curated_at":"2026-01-01T00:00:00Z","latest_curated_at":"2026-01-02T00:00:00Z"}`
	key := "0190c0de-0000-7000-8000-000000000001"
	status, out := post(t, h.api+"/v1/episodes", "application/json", []byte(body), map[string]string{"Idempotency-Key": key})
	if status != http.StatusAccepted || out["id"] != key {
		t.Fatalf("POST: %d %v", status, out)
	}
	status, out = post(t, h.api+"/v1/episodes", "application/json", []byte(body), map[string]string{"Idempotency-Key": key})
	if status != http.StatusAccepted || out["duplicate"] != true {
		t.Errorf("retried POST: %d %v, want a duplicate", status, out)
	}
	rec := h.waitRecord(t, catalog.Episode, "http:ep-http", func(catalog.Record) bool { return true })
	if rec.Priority != 9 || rec.Producer != "http" || rec.EventID != key {
		t.Errorf("stored %+v", rec)
	}

	clip := events.ClipUpserted{ID: "clip-mp", Title: "msgpack clip", Media: events.Media{Key: "clips/c.flac"},
		InitialCuratedAt: time.Now().UTC(), LatestCuratedAt: time.Now().UTC()}
	mp, _ := msgpack.Marshal(&clip)
	status, out = post(t, h.api+"/v1/clips", "application/msgpack", mp, nil)
	if status != http.StatusAccepted {
		t.Fatalf("msgpack POST: %d %v", status, out)
	}
	h.waitRecord(t, catalog.Clip, "http:clip-mp", func(catalog.Record) bool { return true })

	resp, err := http.Get(h.api + "/v1/episodes/http:ep-http")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, _ = http.Get(h.api + "/v1/episodes/nope")
	if resp.StatusCode != 404 {
		t.Errorf("GET unknown: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestHTTPBadPayloadsSayWhichField(t *testing.T) {
	h := start(t)
	ok := `"id":"e","title":"t","media":{"key":"k"},"duration_ms":1,"priority":1,"initial_curated_at":"2026-01-01T00:00:00Z","latest_curated_at":"2026-01-01T00:00:00Z"`
	cases := []struct {
		name, ct, body, field string
		status                int
	}{
		{"wrong type", "application/json", `{"id":"e","duration_ms":"long"}`, "duration_ms", 400},
		{"unknown field", "application/json", `{` + ok + `,"colour":"red"}`, "colour", 400},
		{"missing key", "application/json", strings.Replace(`{`+ok+`}`, `"key":"k"`, `"key":""`, 1), "media.key", 400},
		{"bad sha", "application/json", strings.Replace(`{`+ok+`}`, `"key":"k"`, `"key":"k","sha256":"xyz"`, 1), "media.sha256", 400},
		{"escape", "application/json", strings.Replace(`{`+ok+`}`, `"key":"k"`, `"key":"../../etc/passwd"`, 1), "media.key", 400},
		{"time order", "application/json", strings.Replace(`{`+ok+`}`, `"latest_curated_at":"2026-01-01T00:00:00Z"`, `"latest_curated_at":"2025-01-01T00:00:00Z"`, 1), "latest_curated_at", 400},
		{"syntax", "application/json", `{"id":`, "", 400},
		{"empty", "application/json", ``, "", 400},
		{"garbage msgpack", "application/msgpack", "\xc1\xc1", "", 400},
		{"content type", "text/plain", `{` + ok + `}`, "", 415},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := post(t, h.api+"/v1/episodes", c.ct, []byte(c.body), nil)
			if status != c.status {
				t.Errorf("status %d (%v), want %d", status, out, c.status)
			}
			if out["error"] == "" || out["error"] == nil {
				t.Errorf("no error message: %v", out)
			}
			if c.field != "" && out["field"] != c.field {
				t.Errorf("field %v (%v), want %s", out["field"], out["error"], c.field)
			}
		})
	}
}

// TestEventFromTheFutureIsRefused: over HTTP an event time more than 5
// minutes ahead is a 400; over NATS nothing bounded it, and one episode
// dated 9999 froze its record for ever (every later change older). It is
// now dead-lettered with its reason and stores nothing.
func TestEventFromTheFutureIsRefused(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	env, err := events.NewAt("radio", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), episode("future", "from 9999"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.bus.Publish(ctx, subjectOf(env), env); err != nil {
		t.Fatal(err)
	}
	st, _ := h.bus.JetStream().Stream(ctx, events.StreamDeadLetter)
	waitFor(t, "a dead letter", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	msg, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := msg.Header.Get(events.HeaderDLQReason); !strings.Contains(r, "in the future") {
		t.Errorf("reason %q", r)
	}
	if _, err := h.cat.Get(ctx, catalog.Episode, "radio:future"); err == nil {
		t.Error("the event from the future was stored")
	}
}
