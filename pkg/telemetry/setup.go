package telemetry

import (
	"context"
	"fmt"
	"strconv"
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
//
// The sampler is the SDK's, from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the chart's
// tracing.samplingRatio), parentbased_always_on when unset. Setup refuses a sampler or ratio the
// SDK would replace by its default with only a log line.
func Setup(ctx context.Context, service string, getenv func(string) string) (Provider, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") ||
		(getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "") {
		return idsOnly{IDs}, nil
	}
	// As the SDK reads them: trimmed, the sampler's name in any case.
	if err := checkSampler(strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))),
		strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))); err != nil {
		return nil, err
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
	// No WithSampler: an option given here overrides the environment's sampler, and every span
	// was exported whatever OTEL_TRACES_SAMPLER said. The SDK's default is parentbased_always_on.
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	), nil
}

// idsOnly is IDs as a Provider: nothing to flush.
type idsOnly struct{ trace.TracerProvider }

func (idsOnly) Shutdown(context.Context) error { return nil }

// checkSampler refuses what the SDK would not apply: a sampler it does not know, or a ratio that
// is not a number from 0 to 1 (the SDK logs either and samples every trace instead).
func checkSampler(sampler, arg string) error {
	switch sampler {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return nil // the SDK's default ratio, 1
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
		}
		return nil
	default:
		return fmt.Errorf("OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio or their parentbased_ forms", sampler)
	}
}
