package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/telemetry"
)

// recordSpans makes the global tracer provider record spans, once for the
// process: the bus's tracer, made at package level, stays with the first
// provider set, so every test shares one recorder and tells its spans by
// their trace id. (Spans are made only where a trace is carried: the other
// tests record nothing.)
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	return sharedRecorder()
}

var sharedRecorder = sync.OnceValue(func() *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(telemetry.Propagator)
	return rec
})

// TestAHandlerRunsInTheTraceOfItsMessage: a message published within a
// span carries its context (traceparent, lower case); the handler runs in
// a consumer span of the same trace; publishing and processing are spans.
func TestAHandlerRunsInTheTraceOfItsMessage(t *testing.T) {
	rec := recordSpans(t)
	b := setup(t)
	ctx, root := otel.Tracer("test").Start(context.Background(), "curation request")
	publish(t, b, testSubject, episode(1)) // outside any trace
	env, err := events.New("bus-test", episode(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, testSubject, env); err != nil {
		t.Fatal(err)
	}
	root.End()
	got := make(chan trace.SpanContext, 2)
	headers := make(chan string, 2)
	sub, err := bus.Consume(context.Background(), b, testConsumer("traced", 5*time.Second, 3), func(ctx context.Context, m *bus.Message[events.EpisodeUpserted]) error {
		got <- trace.SpanContextFromContext(ctx)
		headers <- m.Header.Get("traceparent")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sub)
	var traced bool
	for range 2 {
		select {
		case sc := <-got:
			h := <-headers
			if sc.TraceID() == root.SpanContext().TraceID() {
				traced = true
				if h == "" {
					t.Error("the traced message has no traceparent header")
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatal("messages not handled")
		}
	}
	if !traced {
		t.Fatal("no handler ran in the publisher's trace")
	}
	// The consumer span ends once the handler has returned and the message
	// is acknowledged: after the handler's send above.
	var producer, consumer bool
	for deadline := time.Now().Add(5 * time.Second); !(producer && consumer) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
				continue
			}
			switch {
			case s.SpanKind() == trace.SpanKindProducer && s.Name() == "publish "+testSubject:
				producer = true
			case s.SpanKind() == trace.SpanKindConsumer && s.Name() == "process traced":
				consumer = true
			}
		}
	}
	if !producer || !consumer {
		t.Errorf("spans of the trace: producer %v, consumer %v", producer, consumer)
	}
}
