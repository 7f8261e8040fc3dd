package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/pkg/jobs"
)

// Metrics are lifecycle's instruments. Labels are closed sets: job kind (handled events or
// "other"), outcome, state. No delivery, installation, repository or job ids.
type Metrics struct {
	jobs          *prometheus.GaugeVec
	oldestAge     prometheus.Gauge
	lag           prometheus.Histogram
	claimDuration prometheus.Histogram
	processed     *prometheus.CounterVec
	effects       prometheus.Counter
	recovered     *prometheus.CounterVec
}

// NewMetrics registers lifecycle's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		jobs: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "boardreadyops_lifecycle_jobs",
			Help: "Control-plane jobs by state (available, leased, retrying, dead_letter), refreshed periodically.",
		}, []string{"state"}),
		oldestAge: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_lifecycle_oldest_available_job_age_seconds",
			Help: "Age of the oldest job that is due and not claimed.",
		}),
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "boardreadyops_lifecycle_job_lag_seconds",
			Help:    "Time from a job's creation (the webhook's acceptance) to its completion.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}),
		claimDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "boardreadyops_lifecycle_claim_duration_seconds",
			Help:    "Latency of one job claim query.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}),
		processed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_lifecycle_jobs_processed_total",
			Help: "Jobs processed, by kind and outcome (applied, ignored, unmatched, deferred, retried, dead_letter).",
		}, []string{"kind", "outcome"}),
		effects: f.NewCounter(prometheus.CounterOpts{
			Name: "boardreadyops_lifecycle_effects_enqueued_total",
			Help: "Outbox effects enqueued by lifecycle.",
		}),
		recovered: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_lifecycle_leases_recovered_total",
			Help: "Expired job leases recovered, by the state they moved to.",
		}, []string{"state"}),
	}
}

func (m *Metrics) setStats(st jobs.Stats) {
	m.jobs.WithLabelValues("available").Set(float64(st.Available))
	m.jobs.WithLabelValues("leased").Set(float64(st.Leased))
	m.jobs.WithLabelValues("retrying").Set(float64(st.Retrying))
	m.jobs.WithLabelValues("dead_letter").Set(float64(st.DeadLetter))
	m.oldestAge.Set(st.OldestAvailableAgeSeconds)
}
