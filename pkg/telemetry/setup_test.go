package telemetry_test

import (
	"context"
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
