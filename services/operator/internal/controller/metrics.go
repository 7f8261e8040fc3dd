package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/services/operator/internal/broker"
)

// Metrics are the operator's own metrics. Labels come from closed sets only (trigger, result);
// monitor names go on Events and status, never on labels.
type Metrics struct {
	triggerActive *prometheus.GaugeVec
	recommended   prometheus.Gauge
	scrapes       *prometheus.CounterVec
	scrapeSeconds prometheus.Histogram
}

// NewMetrics registers the operator's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		triggerActive: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "boardreadyops_operator_broker_trigger_active",
			Help: "1 while a broker-transition trigger (claim_latency, oldest_available_age, throughput) is sustained on any OutboxMonitor, else 0.",
		}, []string{"trigger"}),
		recommended: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_operator_broker_evaluation_recommended",
			Help: "1 while any OutboxMonitor recommends evaluating an external broker (a trigger sustained after recorded tuning), else 0.",
		}),
		scrapes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_operator_scrapes_total",
			Help: "Scrapes of dispatcher pods' metrics endpoints, by result (success, failure).",
		}, []string{"result"}),
		scrapeSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "boardreadyops_operator_scrape_round_duration_seconds",
			Help:    "Duration of one scrape round over all of a monitor's dispatcher pods.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
	}
	for _, t := range broker.Triggers {
		m.triggerActive.WithLabelValues(t.Label()).Set(0)
	}
	m.scrapes.WithLabelValues("success")
	m.scrapes.WithLabelValues("failure")
	return m
}

// ObserveRound records one scrape round of the local mode (operator evaluate): its scrapes by
// result and its duration.
func (m *Metrics) ObserveRound(succeeded, failed int, seconds float64) {
	m.scrapes.WithLabelValues("success").Add(float64(succeeded))
	m.scrapes.WithLabelValues("failure").Add(float64(failed))
	m.scrapeSeconds.Observe(seconds)
}

// SetTriggers sets the trigger gauges to the sustained triggers and the recommendation gauge
// (the local mode's evaluation, which has no OutboxMonitor status to aggregate).
func (m *Metrics) SetTriggers(active []broker.Trigger, recommended bool) {
	on := map[broker.Trigger]bool{}
	for _, t := range active {
		on[t] = true
	}
	for _, t := range broker.Triggers {
		m.triggerActive.WithLabelValues(t.Label()).Set(boolGauge(on[t]))
	}
	m.recommended.Set(boolGauge(recommended))
}
