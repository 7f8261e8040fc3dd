package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// Every lifecycle metric is named boardreadyops_lifecycle_* (or is one of the release-run
// signals named across services), has help, and carries labels from closed sets only.
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
		"state": {"available": true, "leased": true, "retrying": true, "dead_letter": true,
			"requested": true, "check_pending": true, "dispatching": true, "running": true, "blocked": true},
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labelled := 0
	for _, mf := range mfs {
		signal := mf.GetName() == "boardreadyops_release_runs_stale" || mf.GetName() == "boardreadyops_workflow_completions_unmatched_total" ||
			mf.GetName() == outbox.OtherCommitMetric
		if !strings.HasPrefix(mf.GetName(), "boardreadyops_lifecycle_") && !signal || mf.GetHelp() == "" {
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

// The stale gauge counts unfinished runs whose state has not changed for StaleAfter, by state, and
// exports every state's series from the start.
func TestStaleReleaseRunsGauge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.metricsReg = reg
	b.withWorker(nil, func(c *worker.Config) { c.StaleAfter = time.Hour })
	if got := gaugeValues(t, reg, "boardreadyops_release_runs_stale"); len(got) != 5 || got["check_pending"] != 0 {
		t.Fatalf("before any run: %v, want five series at 0", got)
	}
	for _, tag := range []string{"v1.0.0", "v1.0.1", "v1.0.2"} {
		b.deliver(pushTag(tag, sha))
	}
	b.drain()
	b.exec(`UPDATE release_runs SET created_at = now() - interval '2 hours', updated_at = now() - interval '2 hours' WHERE ref IN ('refs/tags/v1.0.0', 'refs/tags/v1.0.1')`)
	b.exec(`UPDATE release_runs SET status = 'succeeded', completed_at = now() WHERE ref = 'refs/tags/v1.0.1'`) // old but finished
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _ = b.worker.Run(ctx) }()
	for gaugeValues(t, reg, "boardreadyops_release_runs_stale")["check_pending"] != 1 {
		time.Sleep(10 * time.Millisecond)
	}
	got := gaugeValues(t, reg, "boardreadyops_release_runs_stale")
	if got["requested"] != 0 || got["dispatching"] != 0 || got["running"] != 0 || got["blocked"] != 0 {
		t.Fatalf("stale runs %v, want only one check_pending", got)
	}
}

func gaugeValues(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key = l.GetValue()
			}
			if m.GetGauge() != nil {
				out[key] = m.GetGauge().GetValue()
			} else {
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
