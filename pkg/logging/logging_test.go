package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/pkg/logging"
)

// TestTraceIDsInLogLines: a line logged with the context of a piece of
// work carries its trace and span ids, through loggers with attributes
// and groups, in both formats; a line without a span carries none.
func TestTraceIDsInLogLines(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	var buf bytes.Buffer
	log, err := logging.New(logging.Config{Level: "info", Format: "json"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.With("service", "curator").WithGroup("job").InfoContext(ctx, "job stored", "id", "j1")
	log.Info("no work in hand")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	job, _ := first["job"].(map[string]any)
	if first["service"] != "curator" || job["trace_id"] != tid.String() || job["span_id"] != sid.String() || job["id"] != "j1" {
		t.Errorf("a line with a span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("a line without a span names a trace: %s", lines[1])
	}

	buf.Reset()
	text, err := logging.New(logging.Config{Level: "info", Format: "text"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	text.InfoContext(ctx, "job stored")
	if !strings.Contains(buf.String(), "trace_id=") || !strings.Contains(buf.String(), tid.String()) {
		t.Errorf("text line: %q", buf.String())
	}
}
