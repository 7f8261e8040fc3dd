package telemetry

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Observe records v on o with ctx's trace id as exemplar when there is one, so a latency outlier
// on a dashboard links to its trace. Trace ids go into exemplars, never into labels.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	ObserveTraceID(o, v, TraceID(ctx))
}

// ObserveTraceID records v with traceID ("" for none) as exemplar.
func ObserveTraceID(o prometheus.Observer, v float64, traceID string) {
	if traceID != "" {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": traceID})
			return
		}
	}
	o.Observe(v)
}
