package telemetry

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is a service's tracer provider: Shutdown flushes what it has not exported yet.
type Provider interface {
	trace.TracerProvider
	Shutdown(context.Context) error
}

// Setup builds the service's tracer provider from the standard OpenTelemetry environment: with
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, spans are batched and
// exported over OTLP/HTTP (the exporter reads the other OTEL_EXPORTER_OTLP_* variables itself);
// otherwise, or with OTEL_SDK_DISABLED=true, nothing is exported and nothing is recorded — ids are
// still generated and stored (IDs). Call Shutdown on the provider to flush.
func Setup(ctx context.Context, service string, getenv func(string) string) (Provider, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") ||
		(getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "") {
		return idsOnly{IDs}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "boardreadyops-" + service
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	), nil
}

// idsOnly is IDs as a Provider: nothing to flush.
type idsOnly struct{ trace.TracerProvider }

func (idsOnly) Shutdown(context.Context) error { return nil }
