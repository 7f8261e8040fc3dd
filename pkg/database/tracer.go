package database

import (
	"context"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// queryTracer spans every query, named after the state-machine function it calls (e.g.
// "db boardreadyops_outbox_claim") or its first keyword. The statement text goes
// on the span (bounded); arguments never do.
type queryTracer struct{ tracer trace.Tracer }

var functionCall = regexp.MustCompile(`boardreadyops_[a-z_]+`)

func spanName(sql string) string {
	if f := functionCall.FindString(sql); f != "" {
		return "db " + f
	}
	word, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	return "db " + strings.ToUpper(word)
}

// spanKey marks the span TraceQueryStart started, so TraceQueryEnd never ends a caller's span.
type spanKey struct{}

func (q queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	// Only inside traced work (a webhook, a job, a delivery): idle polling makes no spans.
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	stmt := data.SQL
	if len(stmt) > 1024 {
		stmt = stmt[:1024]
	}
	ctx, span := q.tracer.Start(ctx, spanName(data.SQL), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.String("db.query.text", stmt)))
	return context.WithValue(ctx, spanKey{}, span)
}

func (q queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	if data.Err != nil {
		span.RecordError(data.Err)
		span.SetStatus(codes.Error, "query failed")
	}
	span.End()
}
