package telemetry_test

import (
	"context"
	"os"
	"testing"

	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// TestSetupRecordsOnlyWhatItExports: without an exporter (or with the SDK disabled) a service's
// spans carry ids and record nothing; with an OTLP endpoint they are recorded for export.
func TestSetupRecordsOnlyWhatItExports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		env    map[string]string
		record bool
	}{
		{"no exporter", nil, false},
		{"disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, false},
		{"exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp, err := telemetry.Setup(context.Background(), "test", func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("test").Start(context.Background(), "op")
			if !span.SpanContext().IsValid() || !span.SpanContext().IsSampled() || span.IsRecording() != tc.record {
				t.Fatalf("span %v recording %v; want valid, sampled, recording %v", span.SpanContext(), span.IsRecording(), tc.record)
			}
			span.End()
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // nothing listens at the endpoint: do not wait for the flush
			_ = tp.Shutdown(ctx)
		})
	}
}

// TestSetupSamplesAsTheEnvironmentSays: OTEL_TRACES_SAMPLER and its ratio (the chart's
// tracing.samplingRatio) decide which root spans are sampled; an explicit sampler in Setup once
// overrode them and every trace was exported. A sampler or ratio the SDK would ignore is refused.
// Not parallel: the SDK reads the sampler from the process's environment.
func TestSetupSamplesAsTheEnvironmentSays(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg string
		sampled      bool
		err          bool
	}{
		{"", "", true, false},
		{"parentbased_traceidratio", "0", false, false},
		{"traceidratio", "0", false, false},
		{"always_off", "", false, false},
		{"parentbased_traceidratio", "1", true, false},
		{"parentbased_traceidratio", "0.1x", false, true},
		{"traceidratio", "1.5", false, true},
		{"sometimes", "", false, true},
		{" ParentBased_TraceIdRatio ", "0", false, false}, // the SDK trims and lowercases the name
	} {
		t.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
		if tc.sampler == "" {
			os.Unsetenv("OTEL_TRACES_SAMPLER")
			os.Unsetenv("OTEL_TRACES_SAMPLER_ARG")
		}
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg}
		tp, err := telemetry.Setup(context.Background(), "test", func(k string) string { return env[k] })
		if tc.err {
			if err == nil {
				t.Errorf("sampler %q %q: no error", tc.sampler, tc.arg)
			}
			continue
		}
		if err != nil {
			t.Fatalf("sampler %q %q: %v", tc.sampler, tc.arg, err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "op")
		if span.SpanContext().IsSampled() != tc.sampled {
			t.Errorf("sampler %q %q: sampled %v, want %v", tc.sampler, tc.arg, span.SpanContext().IsSampled(), tc.sampled)
		}
		span.End()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = tp.Shutdown(ctx)
	}
}
