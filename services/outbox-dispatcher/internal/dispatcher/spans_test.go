package dispatcher_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// TestRecordedSpansCarryTheirAttributes: with an exporter (a recording tracer) a delivery's span
// and its group commit's span carry their attributes — which are built only for a span that
// records them.
func TestRecordedSpansCarryTheirAttributes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.release(55531, "octo-org/spans", "v1.0.0")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	d := e.dispatcherWith(10*time.Second, func(c *dispatcher.Config) { c.Tracer = tp.Tracer("test") })
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.create/completed"] == 1 })

	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			m[a.Key] = a.Value
		}
		return m
	}
	var deliver, commit sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		a := attrs(s)
		switch {
		case s.Name() == "outbox.deliver" && a["boardreadyops.effect_type"].AsString() == "github.check_run.create":
			deliver = s
		case s.Name() == "db boardreadyops_outbox_complete_check_run_create":
			commit = s
		}
	}
	if deliver == nil || commit == nil {
		t.Fatalf("spans %v: no delivery of the check run's creation, or no span of its completion", rec.Ended())
	}
	a := attrs(deliver)
	if a["boardreadyops.release_run_id"].AsString() != run || a["boardreadyops.outbox_id"].AsInt64() <= 0 ||
		a["github.installation_id"].AsInt64() != 55531 || a["boardreadyops.attempt"].AsInt64() != 1 ||
		a["boardreadyops.outcome"].AsString() != dispatcher.OutcomeCompleted {
		t.Fatalf("delivery span attributes %v", a)
	}
	if c := attrs(commit); commit.SpanKind() != trace.SpanKindClient || c["db.system"].AsString() != "postgresql" ||
		!c["boardreadyops.group_commit"].AsBool() || commit.Parent().SpanID() != deliver.SpanContext().SpanID() {
		t.Fatalf("group commit span: kind %v, attributes %v, parent %v", commit.SpanKind(), c, commit.Parent())
	}
}
