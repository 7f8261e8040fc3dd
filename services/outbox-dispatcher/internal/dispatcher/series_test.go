package dispatcher_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// A freshly started dispatcher exports every series of its closed label sets at 0: the lag
// histogram of each effect type exists before its first observation, so an idle dispatcher's
// panels read 0, not no data.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	dispatcher.NewMetrics(reg)
	scraped := metricstest.Scrape(t, reg)
	types := map[string][]string{"effect_type": outbox.EffectTypes}
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_lag_seconds_count", types)
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_lag_seconds_bucket", map[string][]string{"effect_type": outbox.EffectTypes, "le": {"1", "+Inf"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_rate_limit_deferrals_total", types)
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_effects_processed_total", map[string][]string{"effect_type": outbox.EffectTypes,
		"outcome": {dispatcher.OutcomeCompleted, dispatcher.OutcomeRetried, dispatcher.OutcomeDeferred, dispatcher.OutcomeDeadLetter,
			dispatcher.OutcomeReconciliationRequired, dispatcher.OutcomeLeaseLost, dispatcher.OutcomeStoreFailed}})
	ops := []string{githubapp.OpListCheckRuns, githubapp.OpCreateCheckRun, githubapp.OpUpdateCheckRun, githubapp.OpDispatchWorkflow}
	metricstest.RequireZero(t, scraped, "boardreadyops_github_requests_total", map[string][]string{"operation": ops, "status_class": githubapp.StatusClasses})
	metricstest.RequireZero(t, scraped, "boardreadyops_github_request_duration_seconds_count", map[string][]string{"operation": ops})
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_effects", map[string][]string{"state": {"available", "leased", "retrying", "dead_letter", "reconciliation_required"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_leases_recovered_total", map[string][]string{"state": {"available", "dead_letter", "reconciliation_required"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_outbox_deliveries_in_flight", nil)
	metricstest.RequireZero(t, scraped, "boardreadyops_github_check_run_state_ignored_total", nil)
}
