package worker_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// A freshly started lifecycle exports every series of its closed label sets at 0.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	worker.NewMetrics(reg)
	scraped := metricstest.Scrape(t, reg)
	kinds := append(append([]string(nil), eventdoc.HandledEvents...), "other")
	metricstest.RequireZero(t, scraped, "boardreadyops_lifecycle_jobs_processed_total", map[string][]string{"kind": kinds,
		"outcome": {"applied", "ignored", "unmatched", "deferred", "retried", "dead_letter"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_lifecycle_jobs", map[string][]string{"state": {"available", "leased", "retrying", "dead_letter"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_lifecycle_leases_recovered_total", map[string][]string{"state": {"available", "dead_letter"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_lifecycle_job_lag_seconds_count", nil)
	metricstest.RequireZero(t, scraped, "boardreadyops_lifecycle_effects_enqueued_total", nil)
}
