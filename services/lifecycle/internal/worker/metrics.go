package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
)

// Metrics are lifecycle's instruments. Labels are closed sets: job kind (handled events or
// "other"), outcome, state. No delivery, installation, repository or job ids.
type Metrics struct {
	queue     *queuerun.Metrics
	lag       prometheus.Histogram
	processed *prometheus.CounterVec
	effects   prometheus.Counter
	unmatched prometheus.Counter
	// otherCommit has the dispatcher's namesake (its read-back path): one alert reads both.
	otherCommit prometheus.Counter
	stale       *prometheus.GaugeVec
}

// staleStates are the non-terminal release-run states of the stale gauge, in the order
// boardreadyops_release_run_stale_counts returns them.
var staleStates = []string{"requested", "check_pending", "dispatching", "running", "blocked"}

// jobStates are the states of the jobs gauge, in the order the statistics task counts them.
var jobStates = []string{"available", "leased", "retrying", "dead_letter"}

// NewMetrics registers lifecycle's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	queue, err := queuerun.NewMetrics(reg, queuerun.MetricsConfig{
		States: queuerun.Desc{Name: "boardreadyops_lifecycle_jobs",
			Help: "Control-plane jobs by state (available, leased, retrying, dead_letter), refreshed periodically."},
		StateValues: jobStates,
		OldestAvailableAge: queuerun.Desc{Name: "boardreadyops_lifecycle_oldest_available_job_age_seconds",
			Help: "Age of the oldest job that is due and not claimed."},
		StatsRefreshed: queuerun.Desc{Name: "boardreadyops_lifecycle_stats_refreshed_timestamp_seconds",
			Help: "When this lifecycle replica last read the job queue's statistics (Unix seconds; 0 before the first read). The job gauges keep their last values while the read fails."},
		ClaimDuration: queuerun.Desc{Name: "boardreadyops_lifecycle_claim_duration_seconds", Help: "Latency of one job claim query."},
		Recovered: queuerun.Desc{Name: "boardreadyops_lifecycle_leases_recovered_total",
			Help: "Expired job leases recovered, by the state they moved to."},
		RecoveredStates: []string{"available", "dead_letter"},
	})
	if err != nil {
		panic(err) // the configuration above is fixed
	}
	f := promauto.With(reg)
	m := &Metrics{
		queue: queue,
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "boardreadyops_lifecycle_job_lag_seconds",
			Help:    "Time from a job's creation (the webhook's acceptance) to its completion.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}),
		processed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_lifecycle_jobs_processed_total",
			Help: "Jobs processed, by kind and outcome (applied, ignored, unmatched, deferred, retried, dead_letter).",
		}, []string{"kind", "outcome"}),
		effects: f.NewCounter(prometheus.CounterOpts{
			Name: "boardreadyops_lifecycle_effects_enqueued_total",
			Help: "Outbox effects enqueued by lifecycle.",
		}),
		unmatched: f.NewCounter(prometheus.CounterOpts{
			Name: "boardreadyops_workflow_completions_unmatched_total",
			Help: "workflow_run deliveries of the release workflow recorded as unmatched: no dispatched attempt took them within the match window.",
		}),
		otherCommit: f.NewCounter(prometheus.CounterOpts{
			Name: outbox.OtherCommitMetric,
			Help: outbox.OtherCommitMetricHelp,
		}),
		stale: staleGauge(f),
	}
	// Every series of the closed label sets exists from the start, so that idle reads 0.
	for _, kind := range append(append([]string(nil), eventdoc.HandledEvents...), kindOther) {
		for _, outcome := range jobOutcomes {
			m.processed.WithLabelValues(kind, outcome)
		}
	}
	return m
}

// jobOutcomes is the closed set of the outcome label: the handlers' outcomes and the worker's.
var jobOutcomes = []string{handler.OutcomeApplied, handler.OutcomeIgnored, handler.OutcomeUnmatched,
	resultDeferred, resultRetried, resultDeadLetter}

func staleGauge(f promauto.Factory) *prometheus.GaugeVec {
	g := f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "boardreadyops_release_runs_stale",
		Help: "Release runs in a non-terminal state (requested, check_pending, dispatching, running, blocked) whose state has not changed for the stale threshold, refreshed periodically.",
	}, []string{"state"})
	for _, s := range staleStates {
		g.WithLabelValues(s).Set(0) // every series exists from the start
	}
	return g
}
