package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// IDs is the tracer provider of a service that exports no spans: its spans carry valid, fresh
// span ids in their parent's trace (or a new, sampled trace), exactly as the SDK provider with
// NewTracerProvider's sampler would give them, so traceparents, log trace ids and exemplars are
// the same — but nothing about a span is recorded, because nothing would ever read it. The SDK
// provider records every span until its end even without a processor: in the dispatcher that was
// about a fifth of its CPU (docs/performance.md, "Spans that nobody exports").
var IDs trace.TracerProvider = idsProvider{}

type idsProvider struct{ embedded.TracerProvider }

func (idsProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return idsTracer{} }

type idsTracer struct{ embedded.Tracer }

// Start continues ctx's trace with a new span id; without a parent (or with WithNewRoot) it starts
// a sampled trace. The parent's flags and trace state carry over (ParentBased(AlwaysSample)).
func (idsTracer) Start(ctx context.Context, _ string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	if len(opts) > 0 {
		if c := trace.NewSpanStartConfig(opts...); c.NewRoot() {
			parent = trace.SpanContext{}
		}
	}
	cfg := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()}
	if !parent.IsValid() {
		cfg = trace.SpanContextConfig{TraceFlags: trace.FlagsSampled}
		for !cfg.TraceID.IsValid() {
			binary.BigEndian.PutUint64(cfg.TraceID[:8], rand.Uint64())
			binary.BigEndian.PutUint64(cfg.TraceID[8:], rand.Uint64())
		}
	}
	for !cfg.SpanID.IsValid() {
		binary.BigEndian.PutUint64(cfg.SpanID[:], rand.Uint64())
	}
	span := &idSpan{sc: trace.NewSpanContext(cfg)}
	return trace.ContextWithSpan(ctx, span), span
}

// idSpan is a span that only carries its span context.
type idSpan struct {
	embedded.Span
	sc trace.SpanContext
}

func (s *idSpan) SpanContext() trace.SpanContext        { return s.sc }
func (*idSpan) IsRecording() bool                       { return false }
func (*idSpan) End(...trace.SpanEndOption)              {}
func (*idSpan) AddEvent(string, ...trace.EventOption)   {}
func (*idSpan) AddLink(trace.Link)                      {}
func (*idSpan) RecordError(error, ...trace.EventOption) {}
func (*idSpan) SetStatus(codes.Code, string)            {}
func (*idSpan) SetName(string)                          {}
func (*idSpan) SetAttributes(...attribute.KeyValue)     {}
func (*idSpan) TracerProvider() trace.TracerProvider    { return IDs }
