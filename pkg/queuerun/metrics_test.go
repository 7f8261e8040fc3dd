package queuerun_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
)

var testMetricsConfig = queuerun.MetricsConfig{
	States: queuerun.Desc{Name: "boardreadyops_test_items", Help: "Items by state."}, StateValues: []string{"available", "leased"},
	OldestAvailableAge: queuerun.Desc{Name: "boardreadyops_test_oldest_available_item_age_seconds", Help: "Age of the oldest due item."},
	StatsRefreshed:     queuerun.Desc{Name: "boardreadyops_test_stats_refreshed_timestamp_seconds", Help: "Last statistics."},
	ClaimDuration:      queuerun.Desc{Name: "boardreadyops_test_claim_duration_seconds", Help: "Latency of one claim."},
	Recovered:          queuerun.Desc{Name: "boardreadyops_test_leases_recovered_total", Help: "Expired item leases recovered."},
}

func testMetrics(tb testing.TB, reg prometheus.Registerer) *queuerun.Metrics {
	tb.Helper()
	m, err := queuerun.NewMetrics(reg, testMetricsConfig)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// The instruments are registered on the given registry under the configured names; SetStats
// sets every state of the closed set.
func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := testMetrics(t, reg)
	if got := testutil.ToFloat64(m.StatsRefreshed); got != 0 {
		t.Fatalf("refreshed %v before any statistics, want 0", got)
	}
	before := float64(time.Now().UnixNano()) / 1e9
	if err := m.SetStats(12.5, 3); err != nil { // no count for leased: 0
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.StatsRefreshed); got < before-1 || got > before+60 {
		t.Fatalf("refreshed %v, want about %v", got, before)
	}
	m.ClaimDuration.Observe(0.002)
	m.Recovered.WithLabelValues("available").Inc()
	want := `
# HELP boardreadyops_test_items Items by state.
# TYPE boardreadyops_test_items gauge
boardreadyops_test_items{state="available"} 3
boardreadyops_test_items{state="leased"} 0
# HELP boardreadyops_test_leases_recovered_total Expired item leases recovered.
# TYPE boardreadyops_test_leases_recovered_total counter
boardreadyops_test_leases_recovered_total{state="available"} 1
# HELP boardreadyops_test_oldest_available_item_age_seconds Age of the oldest due item.
# TYPE boardreadyops_test_oldest_available_item_age_seconds gauge
boardreadyops_test_oldest_available_item_age_seconds 12.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "boardreadyops_test_items",
		"boardreadyops_test_leases_recovered_total", "boardreadyops_test_oldest_available_item_age_seconds"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.ClaimDuration, "boardreadyops_test_claim_duration_seconds"); n != 1 {
		t.Fatalf("claim histogram: %d series, want 1", n)
	}
	if err := m.SetStats(0, 1, 2, 3); err == nil {
		t.Fatal("SetStats accepted more counts than states")
	}
	// Nothing went to the global registry.
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "boardreadyops_") {
			t.Fatalf("%s registered on the global registry", mf.GetName())
		}
	}
}

func TestNewMetricsValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *queuerun.MetricsConfig)
	}{
		{"no gauge name", func(c *queuerun.MetricsConfig) { c.States.Name = "" }},
		{"no recovered name", func(c *queuerun.MetricsConfig) { c.Recovered.Name = "" }},
		{"no state values", func(c *queuerun.MetricsConfig) { c.StateValues = nil }},
		{"no claim help", func(c *queuerun.MetricsConfig) { c.ClaimDuration.Help = " " }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testMetricsConfig
			tt.change(&cfg)
			if _, err := queuerun.NewMetrics(prometheus.NewRegistry(), cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// A fresh registry exports every state and every recovered state at 0: an idle queue reads 0,
// not no data.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	cfg := testMetricsConfig
	cfg.RecoveredStates = []string{"available", "dead_letter"}
	if _, err := queuerun.NewMetrics(reg, cfg); err != nil {
		t.Fatal(err)
	}
	scraped := metricstest.Scrape(t, reg)
	metricstest.RequireZero(t, scraped, "boardreadyops_test_items", map[string][]string{"state": {"available", "leased"}})
	metricstest.RequireZero(t, scraped, "boardreadyops_test_leases_recovered_total", map[string][]string{"state": {"available", "dead_letter"}})
}

// The claim histogram resolves the range its targets and alerts read: sorted, it keeps the
// alerts' 10 ms bound, and from 5 ms to 100 ms no bucket is more than 1.5 times the one below.
func TestClaimBucketsResolveTheTargetRange(t *testing.T) {
	t.Parallel()
	b := queuerun.ClaimBuckets
	has10ms := false
	for i, ub := range b {
		if ub == 0.01 {
			has10ms = true
		}
		if i == 0 {
			continue
		}
		if ub <= b[i-1] {
			t.Fatalf("buckets not increasing at %d: %v", i, b)
		}
		if b[i-1] >= 0.005 && ub <= 0.1 && ub > 1.5*b[i-1] {
			t.Errorf("bucket %g is %.2f× the one below (%g); want ≤ 1.5× from 5 ms to 100 ms", ub, ub/b[i-1], b[i-1])
		}
	}
	if !has10ms {
		t.Errorf("no 10 ms bucket: the claim latency alerts read le=\"0.01\"")
	}
}

// A failed statistics query leaves the gauges as they were, StatsRefreshed too: its age is what
// tells that the others are old (a dispatcher that cannot reach PostgreSQL keeps exporting the
// oldest age it last read, and only BoardReadyOps*StatsStale sees it).
func TestFailedStatsLeaveTheRefreshTime(t *testing.T) {
	t.Parallel()
	m := testMetrics(t, prometheus.NewRegistry())
	fail := false
	task := queuerun.Stats{Name: "read test statistics", Interval: time.Second,
		Read: func(context.Context) (float64, []int64, error) {
			if fail {
				return 0, nil, errors.New("connection refused")
			}
			return 4, []int64{1, 2}, nil
		}}.Task(m)
	if err := task.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	refreshed := testutil.ToFloat64(m.StatsRefreshed)
	if refreshed == 0 {
		t.Fatal("no refresh time after a successful read")
	}
	m.StatsRefreshed.Set(refreshed - 600) // as if ten minutes ago
	fail = true
	if err := task.Run(context.Background()); err == nil {
		t.Fatal("the failed read returned no error")
	}
	if got := testutil.ToFloat64(m.StatsRefreshed); got != refreshed-600 {
		t.Fatalf("refreshed %v after a failed read, want %v", got, refreshed-600)
	}
	if got := testutil.ToFloat64(m.OldestAvailableAge); got != 4 {
		t.Fatalf("oldest age %v after a failed read, want the last read's 4", got)
	}
}
