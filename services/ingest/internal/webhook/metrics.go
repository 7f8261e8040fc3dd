package webhook

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// Metrics are ingest's instruments. Labels come only from closed sets: the handled events plus
// "other", and the Result* values. Delivery, installation and repository ids never become labels.
type Metrics struct {
	deliveries *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	inFlight   prometheus.Gauge
	filtered   *prometheus.CounterVec
}

// EventOther is the event label of every event that is not handled.
const EventOther = "other"

// NewMetrics registers ingest's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		deliveries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_ingest_deliveries_total",
			Help: "Webhook deliveries received, by event (handled events, else \"other\") and result.",
		}, []string{"event", "result"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boardreadyops_ingest_request_duration_seconds",
			Help:    "Time from request start to response, by result.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"result"}),
		inFlight: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_ingest_requests_in_flight",
			Help: "Webhook requests being handled now.",
		}),
		filtered: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_webhook_deliveries_filtered_total",
			Help: "Verified deliveries answered 202 and not stored because they can never matter, by event and reason (docs/webhooks.md).",
		}, []string{"event", "reason"}),
	}
	// Every series of the closed label sets exists from the start, so that idle reads 0.
	for _, result := range Results {
		m.duration.WithLabelValues(result)
		for _, event := range append(append([]string(nil), eventdoc.HandledEvents...), EventOther) {
			m.deliveries.WithLabelValues(event, result)
		}
	}
	for _, r := range eventdoc.FilterRules {
		m.filtered.WithLabelValues(r.Event, r.Reason)
	}
	return m
}

func (m *Metrics) observe(ctx context.Context, event, result string, seconds float64) {
	if !eventdoc.Handled(event) {
		event = EventOther
	}
	m.deliveries.WithLabelValues(event, result).Inc()
	telemetry.Observe(ctx, m.duration.WithLabelValues(result), seconds)
}
