package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	researchmigrations "github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/services/auditor/auditor"
	auditormigrations "github.com/archivist/archivist/services/auditor/migrations"
	"github.com/archivist/archivist/services/curator/curator"
	"github.com/archivist/archivist/services/curator/ingest/origin"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
	"github.com/archivist/archivist/services/cwa/cwa"
	"github.com/archivist/archivist/services/indexer/indexer"
	indexermigrations "github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/pwa/pwa"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// recordSpans makes this process record spans in memory, once: tracers
// made before the first global provider was set (the bus's, ingest's, at
// package level) stay with that first provider, so every test shares one
// recorder and tells its spans by their trace id.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	return sharedRecorder()
}

var sharedRecorder = sync.OnceValue(func() *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	// Only the traces these tests start (their root "call ..." spans) are
	// sampled: the package's other tests record nothing.
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(testRoots{}))))
	otel.SetTextMapPropagator(telemetry.Propagator)
	return rec
})

// testRoots samples a root span only when a test started it (tracedPOST).
type testRoots struct{}

func (testRoots) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if strings.HasPrefix(p.Name, "call ") {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (testRoots) Description() string { return "the trace tests' roots" }

// tracedPOST posts body as JSON to url in a new trace of a calling system,
// and returns the trace's root span.
func tracedPOST(t *testing.T, url string, body any, want int) trace.Span {
	t.Helper()
	ctx, root := otel.Tracer("calling-system").Start(context.Background(), "call "+url)
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	root.End()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d, want %d", url, resp.StatusCode, want)
	}
	return root
}

// TestOneTraceFollowsACurationRecord: a curating system's traced POST runs
// as one trace through the curator's API, its consumers (records, the
// matcher, the merger), the database, the pwa's consumer of the merged
// works, the work item the pwa leases for the episode, the researcher that
// takes it, and the cwa that stores its results.
func TestOneTraceFollowsACurationRecord(t *testing.T) {
	rec, natsURL, port, bs := traceRig(t)
	ctx := context.Background()
	for key, audio := range map[string]string{"audio/traced.wav": "the traced episode's audio", "audio/jingle.wav": "a jingle"} {
		if _, err := bs.Put(ctx, key, strings.NewReader(audio), nil); err != nil {
			t.Fatal(err)
		}
	}
	research := testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, researchmigrations.Schema), Blob: bs}
	vars := map[string]string{"RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s"}
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, curatormigrations.Schema)},
		map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port)})
	pwaAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartServiceIn(t, pwa.Definition(), research, map[string]string{"RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s", "PWA_HTTP_ADDR": pwaAddr})
	testenv.StartServiceIn(t, cwa.Definition(), research, vars)
	testenv.StartServiceIn(t, researcher.Definition(&testLocator{}), research, vars)

	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	record := func(id, key string) map[string]any {
		return map[string]any{"id": id, "title": id, "media": map[string]string{"key": key},
			"duration_ms": 1000, "priority": 0, "initial_curated_at": at, "latest_curated_at": at}
	}
	// A clip first (its own trace), then the traced episode that is leased
	// with it.
	tracedPOST(t, fmt.Sprintf("http://127.0.0.1:%d/v1/clips", port), record("jingle", "audio/jingle.wav"), http.StatusAccepted)
	time.Sleep(500 * time.Millisecond)
	root := tracedPOST(t, fmt.Sprintf("http://127.0.0.1:%d/v1/episodes", port), record("traced-ep", "audio/traced.wav"), http.StatusAccepted)
	waitForTrace(t, rec, root, "POST curator API", "process curator-episodes", "process curator-merger", "process pwa-works",
		"publish "+events.SubjectWorkItem, "process researchers", "publish "+events.SubjectResearchCompleted, "process cwa-results")
	// The episode's history names its trace (the dashboard shows it).
	wantTraceID(t, "http://"+pwaAddr+"/v1/research/history?episode=http:traced-ep", root)
}

// wantTraceID wants the history at url to name root's trace.
func wantTraceID(t *testing.T, url string, root trace.Span) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil || h.TraceID != root.SpanContext().TraceID().String() {
		t.Errorf("%s: trace id %q (%v), want %s", url, h.TraceID, err, root.SpanContext().TraceID())
	}
}

// TestOneTraceFollowsABatch: a depositor's traced batch submission runs as
// one trace through every ingest step of the batch and its job, the
// objects' archive.object.recorded, and the auditor's and the indexer's
// consumers of them.
func TestOneTraceFollowsABatch(t *testing.T) {
	rec, natsURL, port, bs := traceRig(t)
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, curatormigrations.Schema), Blob: bs},
		map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "INGEST_ALLOW_PRIVATE": "true",
			"INGEST_WORK_DIR": t.TempDir(), "INGEST_MIN_FREE_BYTES": "1048576", "INGEST_INTERVAL": "200ms"})
	testenv.StartServiceIn(t, auditor.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, auditormigrations.Schema), Blob: bs}, nil)
	testenv.StartServiceIn(t, indexer.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, indexermigrations.Schema), Blob: bs}, nil)

	srv := httptest.NewServer(origin.New(map[string][]byte{"/report.txt": []byte("a deposited report")}))
	t.Cleanup(srv.Close)
	root := tracedPOST(t, fmt.Sprintf("http://127.0.0.1:%d/v1/batches", port), map[string]string{"submitter": "t", "profile": "traced",
		"payload_url": srv.URL + "/report.txt", "type": "file"}, http.StatusCreated)
	waitForTrace(t, rec, root, "POST curator API", "ingest batch pending", "ingest job pending", "ingest job downloading",
		"ingest job storing", "ingest job recording", "publish batch", "process auditor-recorded", "process indexer-recorded")
	wantTraceID(t, fmt.Sprintf("http://127.0.0.1:%d/v1/ingest/history?job=1", port), root)
}

// traceRig is what both trace tests start from: the span recorder, a NATS
// account, a free port for the curator's API and a blob store.
func traceRig(t *testing.T) (*tracetest.SpanRecorder, string, int, blob.Store) {
	t.Helper()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return recordSpans(t), testenv.NATS(t), testenv.FreePort(t), bs
}

// waitForTrace waits until every span named want has ended in root's
// trace, with query spans among them.
func waitForTrace(t *testing.T, rec *tracetest.SpanRecorder, root trace.Span, want ...string) {
	t.Helper()
	var names map[string]bool
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		names = map[string]bool{}
		queries := 0
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
				continue
			}
			names[s.Name()] = true
			if strings.HasPrefix(s.Name(), "query") || s.Name() == "batch query" || strings.Contains(s.Name(), "INSERT") || strings.Contains(s.Name(), "SELECT") {
				queries++
			}
		}
		missing := []string{}
		for _, w := range want {
			if !names[w] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 && queries > 0 {
			t.Logf("one trace: %d span names (%v), %d query spans", len(names), keys(names), queries)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace lacks %v (queries %d); its spans: %v", missing, queries, keys(names))
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
