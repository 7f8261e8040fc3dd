package controller

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsLabelsAreClosedSets lists every metric the operator registers and fails on a name
// outside the boardreadyops_operator_ namespace, a missing Help, or a label outside the closed
// sets (trigger, result) — monitor names and namespaces must never become label values.
func TestMetricsLabelsAreClosedSets(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]map[string]bool{
		"trigger": {"claim_latency": true, "oldest_available_age": true, "throughput": true},
		"result":  {"success": true, "failure": true},
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if !strings.HasPrefix(mf.GetName(), "boardreadyops_operator_") || mf.GetHelp() == "" {
			t.Errorf("%s: want the boardreadyops_operator_ prefix and a Help text", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowed[l.GetName()][l.GetValue()] {
					t.Errorf("%s: label %s=%q outside the allow-list", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	sort.Strings(names)
	want := "boardreadyops_operator_broker_evaluation_recommended boardreadyops_operator_broker_trigger_active boardreadyops_operator_scrape_round_duration_seconds boardreadyops_operator_scrapes_total"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("metrics = %s\nwant      %s", got, want)
	}
}
