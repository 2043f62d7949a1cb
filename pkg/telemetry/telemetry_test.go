package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/pkg/telemetry"
)

// TestSetupFollowsTheSDKsVariables: off without an endpoint (nothing
// exported, a context still carried); grpc refused naming the variable;
// with an endpoint, spans go over OTLP/HTTP to it.
func TestSetupFollowsTheSDKsVariables(t *testing.T) {
	ctx := context.Background()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := telemetry.Setup(ctx, "test")
	if err != nil || telemetry.Enabled() {
		t.Fatalf("without an endpoint: %v, enabled %v", err, telemetry.Enabled())
	}
	shutdown(ctx)

	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" && r.Method == http.MethodPost {
			io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			posts.Add(1)
		}
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := telemetry.Setup(ctx, "test"); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("grpc: %v, want an error naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	shutdown, err = telemetry.Setup(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(ctx, "work")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("no span reached the OTLP/HTTP endpoint")
	}
}

// TestTraceContextInMessageHeaders: the context goes into a message's
// headers under the W3C names, lower case, and comes back out.
func TestTraceContextInMessageHeaders(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagator)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "parent")
	defer span.End()
	h := nats.Header{}
	telemetry.Inject(ctx, h)
	if len(h["traceparent"]) != 1 || !strings.Contains(h["traceparent"][0], span.SpanContext().TraceID().String()) {
		t.Fatalf("headers %v, want traceparent with the trace id", h)
	}
	got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), h))
	if got.TraceID() != span.SpanContext().TraceID() || !got.IsRemote() {
		t.Errorf("extracted %v, want the parent's trace", got)
	}
	if sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), nil)); sc.IsValid() {
		t.Error("no headers gave a trace")
	}
}

// TestTraceparentRoundTrip: a span context kept as a traceparent string
// (a record's column) comes back as the same trace; nothing kept, nothing
// comes back.
func TestTraceparentRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	tp := telemetry.Traceparent(ctx)
	if tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent %q", tp)
	}
	back := trace.SpanContextFromContext(telemetry.WithTraceparent(context.Background(), tp))
	if back.TraceID() != tid || back.SpanID() != sid || !back.IsRemote() {
		t.Errorf("restored %v", back)
	}
	if got := telemetry.TraceIDOf(tp); got != tid.String() {
		t.Errorf("trace id %q", got)
	}
	if telemetry.Traceparent(context.Background()) != "" || telemetry.TraceIDOf("") != "" || telemetry.TraceIDOf("00-nonsense") != "" || telemetry.TraceID(context.Background()) != "" {
		t.Error("something from nothing")
	}
	if telemetry.WithTraceparent(ctx, "") != ctx {
		t.Error("an empty traceparent changed the context")
	}
}
