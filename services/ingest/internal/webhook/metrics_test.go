package webhook_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// Every ingest metric is named boardreadyops_ingest_* (or is the agreed filter counter), has help, and carries labels from closed
// sets only — never a delivery, installation or repository id.
func TestMetricLabelsAreClosedSets(t *testing.T) {
	t.Parallel()
	e := setup(t)
	push := fixture(t, "push.tag_created")
	e.send(t, req{event: "push", body: push})
	e.send(t, req{event: "push", body: push, unsigned: true})
	e.send(t, req{event: "issues", body: []byte(`{}`)})
	e.send(t, req{method: http.MethodGet, event: "made_up_event", body: push})
	events := map[string]bool{webhook.EventOther: true}
	for _, ev := range eventdoc.HandledEvents {
		events[ev] = true
	}
	e.send(t, req{event: "push", body: fixture(t, "push.branch")})
	results := map[string]bool{}
	for _, r := range webhook.Results {
		results[r] = true
	}
	reasons := map[string]bool{}
	for _, r := range eventdoc.FilterRules {
		reasons[r.Reason] = true
	}
	allowed := map[string]map[string]bool{"event": events, "result": results, "reason": reasons}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		// The filter counter's name was agreed across services (boardreadyops_webhook_*).
		named := strings.HasPrefix(mf.GetName(), "boardreadyops_ingest_") || mf.GetName() == "boardreadyops_webhook_deliveries_filtered_total"
		if !named || mf.GetHelp() == "" {
			t.Errorf("metric %s: bad name or no help", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowed[l.GetName()][l.GetValue()] {
					t.Errorf("%s{%s=%q}: label outside its closed set", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}
