package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/pkg/telemetry"
)

func TestTraceparentRoundTrip(t *testing.T) {
	t.Parallel()
	tp := telemetry.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "root")
	defer span.End()

	header := telemetry.Traceparent(ctx)
	if header == "" {
		t.Fatal("no traceparent for a live span")
	}
	// A later process continues the trace from the stored value.
	later := telemetry.ContextWithTraceparent(context.Background(), header)
	_, child := tp.Tracer("test").Start(later, "child")
	defer child.End()
	if child.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Fatal("child is not in the parent's trace")
	}
	if telemetry.TraceID(ctx) != span.SpanContext().TraceID().String() {
		t.Fatal("TraceID mismatch")
	}
	if telemetry.Traceparent(context.Background()) != "" || telemetry.TraceID(context.Background()) != "" {
		t.Fatal("empty context produced trace context")
	}
	if sc := trace.SpanContextFromContext(telemetry.ContextWithTraceparent(context.Background(), "garbage")); sc.IsValid() {
		t.Fatal("garbage traceparent produced a span context")
	}
}

func TestObserveAttachesTraceIDExemplar(t *testing.T) {
	t.Parallel()
	for _, tp := range []trace.TracerProvider{telemetry.NewTracerProvider(), telemetry.IDs} {
		ctx, span := tp.Tracer("test").Start(context.Background(), "op")
		defer span.End()
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h", Buckets: []float64{1}})
		telemetry.Observe(ctx, h, 0.5)
		var m dto.Metric
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		ex := m.GetHistogram().GetBucket()[0].GetExemplar()
		if ex == nil || len(ex.GetLabel()) != 1 || ex.GetLabel()[0].GetValue() != span.SpanContext().TraceID().String() {
			t.Fatalf("%T: exemplar %v", tp, ex)
		}
	}
}

// TestIDsMatchTheSDK: the provider of a service without an exporter gives its spans the ids the
// SDK provider would — a sampled new trace at the root; the parent's trace, flags and state with
// a new span id below it; a new trace for WithNewRoot — and records nothing.
func TestIDsMatchTheSDK(t *testing.T) {
	t.Parallel()
	unsampled := telemetry.ContextWithTraceparent(context.Background(), "00-0123456789abcdef0123456789abcdef-0123456789abcdef-00")
	sampled := telemetry.ContextWithTraceparent(context.Background(), "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01")
	for _, tc := range []struct {
		name   string
		parent context.Context
		opts   []trace.SpanStartOption
	}{
		{"root", context.Background(), nil},
		{"sampled parent", sampled, []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}},
		{"unsampled parent", unsampled, nil},
		{"new root", sampled, []trace.SpanStartOption{trace.WithNewRoot()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parent := trace.SpanContextFromContext(tc.parent)
			var got [2]trace.SpanContext
			for i, tp := range []trace.TracerProvider{telemetry.NewTracerProvider(), telemetry.IDs} {
				ctx, span := tp.Tracer("test").Start(tc.parent, "op", tc.opts...)
				sc := span.SpanContext()
				if !sc.IsValid() || sc.SpanID() == parent.SpanID() || !trace.SpanContextFromContext(ctx).Equal(sc) {
					t.Fatalf("provider %d: span context %v under parent %v", i, sc, parent)
				}
				if newTrace := sc.TraceID() != parent.TraceID(); newTrace != (!parent.IsValid() || tc.name == "new root") {
					t.Fatalf("provider %d: trace %v under parent %v", i, sc.TraceID(), parent.TraceID())
				}
				got[i] = sc
				span.End()
			}
			if got[0].TraceFlags() != got[1].TraceFlags() || got[0].IsRemote() != got[1].IsRemote() ||
				(got[0].TraceID() == parent.TraceID()) != (got[1].TraceID() == parent.TraceID()) {
				t.Fatalf("the SDK gave %v, IDs %v", got[0], got[1])
			}
		})
	}
	ctx, span := telemetry.IDs.Tracer("test").Start(context.Background(), "op")
	if span.IsRecording() {
		t.Fatal("an IDs span records")
	}
	// A span started from the span's own provider (the ingest store's) continues the trace.
	_, child := trace.SpanFromContext(ctx).TracerProvider().Tracer("x").Start(ctx, "child")
	if child.SpanContext().TraceID() != span.SpanContext().TraceID() || child.SpanContext().SpanID() == span.SpanContext().SpanID() {
		t.Fatalf("child %v of %v", child.SpanContext(), span.SpanContext())
	}
	if telemetry.Traceparent(ctx) == "" || telemetry.TraceID(ctx) != span.SpanContext().TraceID().String() {
		t.Fatal("no traceparent or trace id for an IDs span")
	}
}

// TestClaimSpanReadsItemsOnlyWhenRecording: a claim span of telemetry.IDs (no exporter) reads
// none of the claimed items' traceparents; a recording one links to each valid one.
func TestClaimSpanReadsItemsOnlyWhenRecording(t *testing.T) {
	t.Parallel()
	tps := []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "garbage", ""}
	items := []int{0, 1, 2, 3} // item 3 has none
	for _, tc := range []struct {
		name      string
		recording bool
	}{{"no exporter", false}, {"recording", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			tracer := telemetry.IDs.Tracer("test")
			if tc.recording {
				tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
			}
			read := 0
			start := time.Now()
			telemetry.ClaimSpan(tracer, "test.claim", start, start.Add(time.Millisecond), items, func(i int) *string {
				read++
				if i < len(tps) {
					return &tps[i]
				}
				return nil
			})
			if !tc.recording {
				if read != 0 {
					t.Fatalf("%d traceparents read for a span that records nothing", read)
				}
				return
			}
			spans := rec.Ended()
			if read != len(items) || len(spans) != 1 || len(spans[0].Links()) != 1 ||
				spans[0].Links()[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Fatalf("%d read, spans %v", read, spans)
			}
			if got := spans[0].Attributes(); len(got) != 1 || got[0].Value.AsInt64() != int64(len(items)) {
				t.Fatalf("attributes %v, want a batch_size of the %d items", got, len(items))
			}
		})
	}
}
