package telemetry_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	tp := telemetry.NewTracerProvider()
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
		t.Fatalf("exemplar %v", ex)
	}
}
