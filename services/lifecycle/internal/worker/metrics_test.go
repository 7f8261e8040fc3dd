package worker_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// Every lifecycle metric is named boardreadyops_lifecycle_*, has help, and carries labels from
// closed sets only.
func TestMetricLabelsAreClosedSets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.metricsRegistry(reg)
	b.deliver(pushTag("v1.0.0", sha))
	b.deliver(eventdoc.Document{Event: "ping", Ping: &eventdoc.Ping{HookID: 1}})
	b.drain()
	kinds := map[string]bool{"other": true}
	for _, k := range eventdoc.HandledEvents {
		kinds[k] = true
	}
	allowed := map[string]map[string]bool{
		"kind":    kinds,
		"outcome": {"applied": true, "ignored": true, "unmatched": true, "deferred": true, "retried": true, "dead_letter": true},
		"state":   {"available": true, "leased": true, "retrying": true, "dead_letter": true},
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labelled := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "boardreadyops_lifecycle_") || mf.GetHelp() == "" {
			t.Errorf("metric %s: bad name or no help", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labelled++
				if !allowed[l.GetName()][l.GetValue()] {
					t.Errorf("%s{%s=%q}: label outside its closed set", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if labelled == 0 {
		t.Fatal("no labelled series")
	}
}
