// Package logging builds the slog logger every Archivist process uses: tint's
// coloured text on a terminal, JSON otherwise.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"github.com/sethvargo/go-envconfig"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"
)

// Config selects level and format.
type Config struct {
	// Level is debug, info, warn or error.
	Level string `env:"LOG_LEVEL, default=info"`
	// Format is auto (text on a terminal, else JSON), text or json.
	Format string `env:"LOG_FORMAT, default=auto"`
}

// FromEnv reads LOG_LEVEL and LOG_FORMAT and returns a logger writing to w.
func FromEnv(ctx context.Context, w io.Writer) (*slog.Logger, error) {
	var cfg Config
	if err := envconfig.Process(ctx, &cfg); err != nil {
		return nil, fmt.Errorf("logging configuration: %w", err)
	}
	return New(cfg, w)
}

// New returns a logger writing to w (os.Stderr if nil).
func New(cfg Config, w io.Writer) (*slog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL %q: want debug, info, warn or error", cfg.Level)
	}
	format := strings.ToLower(cfg.Format)
	if format == "auto" || format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	switch format {
	case "text":
		return slog.New(traceHandler{tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly})}), nil
	case "json":
		return slog.New(traceHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})}), nil
	default:
		return nil, fmt.Errorf("LOG_FORMAT %q: want auto, text or json", cfg.Format)
	}
}

// traceHandler adds the trace and span ids of the context a record was
// logged with (log.InfoContext(ctx, ...)): an operator finds every line of
// one piece of work, across services, by the trace id the dashboard, the
// dead letters and the history show.
type traceHandler struct{ slog.Handler }

// Handle adds trace_id and span_id when ctx carries a span.
func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the trace ids on a logger with attributes.
func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the trace ids on a logger with a group.
func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
