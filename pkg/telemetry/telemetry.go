// Package telemetry sets up tracing and carries W3C trace context through the database: the
// traceparent stored on inbox, job and outbox rows joins the spans of one delivery across the
// three services and any delay.
//
// Span and trace ids are always valid and always stored. With an exporter configured (the OTEL_*
// environment) every service gets the SDK tracer provider and its spans are exported; without one
// it gets IDs, whose spans carry the same ids and record nothing.
package telemetry

import (
	"context"
	"regexp"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// NewTracerProvider returns a provider that samples what its parent sampled and everything that
// starts a trace, with the given span processors (none: ids only, nothing exported).
func NewTracerProvider(processors ...sdktrace.SpanProcessor) *sdktrace.TracerProvider {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample()))}
	for _, p := range processors {
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	return sdktrace.NewTracerProvider(opts...)
}

var traceparentPattern = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// Traceparent renders ctx's span context as a W3C traceparent, or "" when ctx has no valid span.
func Traceparent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tp := carrier.Get("traceparent")
	if !traceparentPattern.MatchString(tp) {
		return ""
	}
	return tp
}

// ContextWithTraceparent returns ctx carrying the remote span context of traceparent, so spans
// started from it continue that trace. An empty or invalid traceparent returns ctx unchanged.
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// TraceID returns ctx's trace id for logs, or "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// ClaimSpan records a span for a claim that returned items, from start to end, linked to the
// traces of the claimed items (their stored traceparents, nil for none), with the number of
// items as boardreadyops.batch_size. Empty claims (idle polling) record nothing. The links and
// attributes are built only for a span that records them (an exporter is configured): parsing
// every claimed item's traceparent for telemetry.IDs' spans was work on the claim loop's serial
// path for nothing.
func ClaimSpan[T any](tracer trace.Tracer, name string, start, end time.Time, items []T, traceparent func(T) *string) {
	_, span := tracer.Start(context.Background(), name, trace.WithTimestamp(start))
	if span.IsRecording() {
		for _, item := range items {
			if tp := traceparent(item); tp != nil {
				if sc := trace.SpanContextFromContext(ContextWithTraceparent(context.Background(), *tp)); sc.IsValid() {
					span.AddLink(trace.Link{SpanContext: sc})
				}
			}
		}
		span.SetAttributes(attribute.Int("boardreadyops.batch_size", len(items)))
	}
	span.End(trace.WithTimestamp(end))
}
