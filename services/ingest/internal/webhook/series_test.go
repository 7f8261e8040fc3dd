package webhook_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// A freshly started ingest exports every series of its closed label sets at 0, so that a
// dashboard or alert on an idle ingest reads 0, not no data.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	webhook.NewMetrics(reg)
	scraped := metricstest.Scrape(t, reg)
	events := append(append([]string(nil), eventdoc.HandledEvents...), webhook.EventOther)
	metricstest.RequireZero(t, scraped, "boardreadyops_ingest_deliveries_total", map[string][]string{"event": events, "result": webhook.Results})
	metricstest.RequireZero(t, scraped, "boardreadyops_ingest_request_duration_seconds_count", map[string][]string{"result": webhook.Results})
	metricstest.RequireZero(t, scraped, "boardreadyops_ingest_requests_in_flight", nil)
}
