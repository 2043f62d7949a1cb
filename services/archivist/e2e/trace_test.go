package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	researchmigrations "github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/pkg/testenv"
	"github.com/archivist/archivist/services/curator/curator"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
	"github.com/archivist/archivist/services/pwa/pwa"
)

// TestOneTraceFollowsACurationRecord: a curating system's traced POST runs
// as one trace through the curator's API, its consumers (records, the
// matcher, the merger), the database, and the pwa's consumer of the
// merged works.
func TestOneTraceFollowsACurationRecord(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(telemetry.Propagator)
	t.Cleanup(func() { otel.SetTracerProvider(prev); otel.SetTextMapPropagator(prevProp) })

	natsURL := testenv.NATS(t)
	port := testenv.FreePort(t)
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, curatormigrations.Schema)},
		map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port)})
	testenv.StartServiceIn(t, pwa.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, researchmigrations.Schema)},
		map[string]string{"PWA_HTTP_ADDR": "127.0.0.1:0", "RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s"})

	ctx, root := otel.Tracer("curating-system").Start(context.Background(), "publish a record")
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	rec1 := map[string]any{"id": "traced-ep", "title": "Traced", "media": map[string]string{"key": "audio/traced.wav"},
		"duration_ms": 1000, "priority": 0, "initial_curated_at": at, "latest_curated_at": at}
	body, _ := json.Marshal(rec1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/episodes", port), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	root.End()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d", resp.StatusCode)
	}

	want := []string{"POST curator API", "process curator-episodes", "process curator-merger", "process pwa-works"}
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
