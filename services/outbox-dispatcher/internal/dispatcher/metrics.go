package dispatcher

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/pkg/checkrun"
	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// Metrics are the dispatcher's instruments: the outbox specification's aggregate queue metrics,
// with labels only from closed sets (state, effect_type, outcome, operation, status_class) —
// never installation, repository, delivery or payload dimensions.
type Metrics struct {
	queue        *queuerun.Metrics
	lag          *prometheus.HistogramVec
	processed    *prometheus.CounterVec
	deferrals    *prometheus.CounterVec
	inFlight     prometheus.Gauge
	requests     *prometheus.CounterVec
	requestTime  *prometheus.HistogramVec
	budgetLowest prometheus.Gauge
	blocked      prometheus.Gauge
	paced        prometheus.Gauge
	// The two release SLOs' indicators (docs/operations.md, "SLOs").
	checkRunVisible prometheus.Histogram
	conclusionShown prometheus.Histogram
	// otherCommit has lifecycle's namesake (its workflow_run completions): one alert reads both.
	otherCommit prometheus.Counter
	// stateIgnored: check-run updates whose state GitHub did not take (githubapp's
	// OnCheckRunStateIgnored).
	stateIgnored prometheus.Counter
}

// effectStates are the states of the effects gauge, in the order the statistics task counts them.
var effectStates = []string{"available", "leased", "retrying", "dead_letter", "reconciliation_required"}

// NewMetrics registers the dispatcher's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	queue, err := queuerun.NewMetrics(reg, queuerun.MetricsConfig{
		States: queuerun.Desc{Name: "boardreadyops_outbox_effects",
			Help: "Outbox effects by state (available, leased, retrying, dead_letter, reconciliation_required), refreshed periodically."},
		StateValues: effectStates,
		OldestAvailableAge: queuerun.Desc{Name: "boardreadyops_outbox_oldest_available_effect_age_seconds",
			Help: "Age of the oldest effect that is due and not claimed."},
		StatsRefreshed: queuerun.Desc{Name: "boardreadyops_outbox_stats_refreshed_timestamp_seconds",
			Help: "When this dispatcher last read the outbox's statistics (Unix seconds; 0 before the first read). The effect gauges keep their last values while the read fails."},
		ClaimDuration: queuerun.Desc{Name: "boardreadyops_outbox_claim_duration_seconds",
			Help: "Claim latency: duration of one outbox claim query. The operator's broker-transition trigger fires when its p99 stays above 250 ms for 5 minutes (docs/operator.md)."},
		Recovered: queuerun.Desc{Name: "boardreadyops_outbox_leases_recovered_total",
			Help: "Expired outbox leases recovered, by the state they moved to."},
		RecoveredStates: []string{outbox.StatusAvailable, outbox.StatusDeadLetter, outbox.StatusReconciliationRequired, outbox.StatusCompleted},
	})
	if err != nil {
		panic(err) // the configuration above is fixed
	}
	f := promauto.With(reg)
	m := &Metrics{
		queue: queue,
		lag: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boardreadyops_outbox_lag_seconds",
			Help:    "Outbox lag: time from an effect's creation to its completion.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"effect_type"}),
		processed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_outbox_effects_processed_total",
			Help: "Effects processed, by effect type and outcome (completed, retried, deferred, dead_letter, reconciliation_required, lease_lost, store_failed).",
		}, []string{"effect_type", "outcome"}),
		deferrals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_outbox_rate_limit_deferrals_total",
			Help: "Effects deferred because their installation is rate limited.",
		}, []string{"effect_type"}),
		inFlight: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_outbox_deliveries_in_flight",
			Help: "Deliveries being performed now by this process.",
		}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "boardreadyops_github_requests_total",
			Help: "GitHub API requests, by operation and status class (2xx, 4xx, 5xx, rate_limited, error).",
		}, []string{"operation", "status_class"}),
		requestTime: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boardreadyops_github_request_duration_seconds",
			Help:    "Duration of GitHub API requests, by operation.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20},
		}, []string{"operation"}),
		budgetLowest: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_github_budget_lowest_remaining_ratio",
			Help: "Lowest share of its primary GitHub budget (x-ratelimit-remaining / -limit) any installation has left in its current window (1 when none is known).",
		}),
		blocked: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_github_installations_rate_limited",
			Help: "Installations blocked now because GitHub rate-limited them (shared by every replica).",
		}),
		paced: f.NewGauge(prometheus.GaugeOpts{
			Name: "boardreadyops_github_installations_paced",
			Help: "Installations held back now by per-installation pacing (a delivery in flight at the limit, or the mutation interval not over).",
		}),
	}
	m.checkRunVisible = f.NewHistogram(prometheus.HistogramOpts{
		Name:    "boardreadyops_release_check_run_visible_seconds",
		Help:    "Time from a release run's creation (the tag push applied) to its check run created on GitHub and recorded; the SLO counts the share within 60 s.",
		Buckets: []float64{1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 1800},
	})
	m.conclusionShown = f.NewHistogram(prometheus.HistogramOpts{
		Name:    "boardreadyops_release_conclusion_shown_seconds",
		Help:    "Time from a workflow_run.completed applied (the check run's completion enqueued) to the conclusion shown on GitHub and recorded; the SLO counts the share within 300 s.",
		Buckets: []float64{5, 10, 30, 60, 120, 180, 240, 300, 360, 450, 600, 1200, 3600},
	})
	m.otherCommit = f.NewCounter(prometheus.CounterOpts{Name: outbox.OtherCommitMetric, Help: outbox.OtherCommitMetricHelp})
	m.stateIgnored = f.NewCounter(prometheus.CounterOpts{Name: "boardreadyops_github_check_run_state_ignored_total",
		Help: "Check-run updates GitHub answered with another status or conclusion than they set: a completed check run it did not reopen (a Re-run, a Retry) or whose conclusion it kept."})
	m.initSeries()
	return m
}

// outcomes is the closed set of the outcome label.
var outcomes = []string{OutcomeCompleted, OutcomeRetried, OutcomeDeferred, OutcomeDeadLetter,
	OutcomeReconciliationRequired, OutcomeLeaseLost, OutcomeStoreFailed}

// githubOperations are the GitHub operations the dispatcher performs (the operation label).
var githubOperations = []string{githubapp.OpListCheckRuns, githubapp.OpCreateCheckRun, githubapp.OpUpdateCheckRun,
	githubapp.OpDispatchWorkflow, githubapp.OpListWorkflowRuns, githubapp.OpGetWorkflowRun, githubapp.OpGetCollaboratorPermission,
	githubapp.OpGetTagCommit}

// initSeries creates every series of the closed label sets, so that an idle dispatcher exports
// 0 (and empty histograms) rather than nothing.
func (m *Metrics) initSeries() {
	for _, et := range outbox.EffectTypes {
		m.lag.WithLabelValues(et)
		m.deferrals.WithLabelValues(et)
		for _, o := range outcomes {
			m.processed.WithLabelValues(et, o)
		}
	}
	for _, op := range githubOperations {
		m.requestTime.WithLabelValues(op)
		for _, class := range githubapp.StatusClasses {
			m.requests.WithLabelValues(op, class)
		}
	}
}

// observeSLO records a completed check-run effect for the release SLOs: its age since its
// creation, which is the release run's creation (check_run.create, enqueued in the same
// transaction) or the applied workflow_run.completed (check_run.complete). Both come from the
// effect's created_at in the database, so the time the effect waited in the outbox, its retries
// and any redelivery are all counted. Only a check-run update that shows a conclusion counts
// for the second SLO: since 00021 a run's check run is also updated while it is dispatching,
// running, blocked or retried, and those updates show no conclusion.
func (m *Metrics) observeSLO(ctx context.Context, e outbox.Effect, p payload, now time.Time) {
	switch e.EffectType {
	case outbox.EffectCheckRunCreate:
		telemetry.Observe(ctx, m.checkRunVisible, now.Sub(e.CreatedAt).Seconds())
	case outbox.EffectCheckRunComplete:
		if showsConclusion(p) {
			telemetry.Observe(ctx, m.conclusionShown, now.Sub(e.CreatedAt).Seconds())
		}
	}
}

// showsConclusion: a check-run update in a finished state, or an earlier completion (no state,
// a conclusion).
func showsConclusion(p payload) bool {
	switch p.State.State {
	case checkrun.StateSucceeded, checkrun.StateFailed, checkrun.StateCancelled:
		return true
	case "":
		return p.Conclusion != ""
	}
	return false
}

// CheckRunStateIgnored counts a check-run update whose state GitHub did not take.
func (m *Metrics) CheckRunStateIgnored() { m.stateIgnored.Inc() }

// ObserveGitHub is githubapp.Config.Observe.
func (m *Metrics) ObserveGitHub(operation, statusClass string, seconds float64) {
	m.requests.WithLabelValues(operation, statusClass).Inc()
	m.requestTime.WithLabelValues(operation).Observe(seconds)
}

func (m *Metrics) setLimitStats(st outbox.LimitStats) {
	lowest := 1.0
	if st.LowestRemainingFraction != nil {
		lowest = *st.LowestRemainingFraction
	}
	m.budgetLowest.Set(lowest)
	m.blocked.Set(float64(st.Blocked))
	m.paced.Set(float64(st.Paced))
}
