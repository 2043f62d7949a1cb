// Package telemetry sets up OpenTelemetry tracing for a process, following
// the SDK's standard environment variables, and carries a W3C trace
// context across NATS messages.
//
// Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: spans are exported over
// OTLP/HTTP (OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf, the default; grpc is
// refused, naming the variable), sampled as OTEL_TRACES_SAMPLER says, the
// resource named by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Off,
// nothing is recorded, but a trace context that arrives (an HTTP request's
// traceparent, a message's) is still passed on, so a traced caller's trace
// runs through.
package telemetry

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the W3C trace context (and baggage) Archivist carries in
// HTTP and NATS headers.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// recording is set once Setup has installed an exporting provider.
var recording atomic.Bool

// Tracing tells whether this process records spans (Setup found an
// endpoint): where it does not, and no trace context arrived, the hot
// paths (every message published and handled) make no span at all.
func Tracing() bool { return recording.Load() }

// Enabled tells whether the environment asks for traces to be exported.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the propagator and, when Enabled, a tracer provider
// exporting over OTLP/HTTP for service (unless OTEL_SERVICE_NAME names it).
// The returned function flushes and stops it.
func Setup(ctx context.Context, service string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(Propagator)
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%s: Archivist exports traces over OTLP/HTTP (http/protobuf) only", v, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		if res, err = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName(name))); err != nil {
			return nil, err
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	recording.Store(true)
	return func(ctx context.Context) error {
		recording.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// Inject writes ctx's trace context into a message's headers, under the
// W3C names (traceparent, tracestate) as they are, lower case.
func Inject(ctx context.Context, h nats.Header) {
	otel.GetTextMapPropagator().Inject(ctx, natsCarrier(h))
}

// Carried tells whether a message's headers carry a trace context.
func Carried(h nats.Header) bool { return len(h["traceparent"]) > 0 }

// Extract returns ctx carrying the trace context of a message's headers.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, natsCarrier(h))
}

// natsCarrier is a message's headers as a propagation carrier, keys kept
// exactly (NATS headers are case-sensitive; W3C's names are lower case).
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// TraceID is the W3C trace id of the span context in ctx, "" when there is
// none (tracing off and nothing carried one in).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.TraceID().IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Traceparent is the W3C traceparent of the span context in ctx, "" when
// there is none: what a record keeps to continue its trace later, in
// another process (a lease's work item, a batch's ingest steps).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx carrying the remote span context of a kept
// traceparent (ctx itself when tp is "" or not one), so that the spans and
// messages made in it continue that trace.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// TraceIDOf is the trace id of a W3C traceparent, "" when it is not one.
func TraceIDOf(tp string) string {
	sc := trace.SpanContextFromContext(WithTraceparent(context.Background(), tp))
	if !sc.TraceID().IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
