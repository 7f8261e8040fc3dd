package webhook_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// With the filter on (the default), a delivery eventdoc.Filter drops is answered 202 "filtered",
// counted by event and reason, and leaves nothing in the database — no inbox row, no job, no body
// digest; every other fixture is stored as before.
func TestFilteredDeliveriesAreNotStored(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(fixtures, "payloads", "*.json"))
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	e := setup(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		event, _, _ := strings.Cut(name, ".")
		t.Run(name, func(t *testing.T) {
			body := fixture(t, name)
			doc, err := eventdoc.Normalize(event, body)
			if err != nil {
				t.Fatal(err)
			}
			reason, filtered := eventdoc.Filter(&doc)
			var before float64
			if filtered {
				before = filteredCount(t, e, event, reason)
			}
			delivery := "filter-" + strings.NewReplacer(".", "-", "_", "-").Replace(name)
			status, _, resp := e.send(t, req{event: event, delivery: delivery, body: body})
			want := webhook.ResultAccepted
			if filtered {
				want = webhook.ResultFiltered
			}
			if status != http.StatusAccepted || resp["status"] != want || resp["delivery_id"] != delivery {
				t.Fatalf("status %d %v, want 202 %s", status, resp, want)
			}
			var inbox, digests int
			if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM webhook_inbox WHERE delivery_id = $1),
				(SELECT count(*) FROM webhook_body_digests WHERE delivery_id = $1)`, delivery).Scan(&inbox, &digests); err != nil {
				t.Fatal(err)
			}
			if filtered {
				if inbox != 0 || digests != 0 {
					t.Fatalf("filtered delivery wrote %d inbox rows, %d digests", inbox, digests)
				}
				if got := filteredCount(t, e, event, reason); got != before+1 {
					t.Fatalf("filtered{event=%q,reason=%q} = %v, want %v", event, reason, got, before+1)
				}
				return
			}
			if inbox != 1 || digests != 1 {
				t.Fatalf("kept delivery: %d inbox rows, %d digests; want 1 and 1", inbox, digests)
			}
		})
	}
	if n := testutil.ToFloat64(counter(t, e.reg, webhook.ResultFiltered)); n != 8 {
		t.Fatalf("deliveries_total{result=filtered} = %v, want 8 (the filtered fixtures)", n)
	}
}

// Every (event, reason) series exists at 0 before the first delivery.
func TestFilteredSeriesStartAtZero(t *testing.T) {
	t.Parallel()
	e := setup(t)
	want := `
# HELP boardreadyops_webhook_deliveries_filtered_total Verified deliveries answered 202 and not stored because they can never matter, by event and reason (docs/webhooks.md).
# TYPE boardreadyops_webhook_deliveries_filtered_total counter
`
	for _, r := range eventdoc.FilterRules {
		want += `boardreadyops_webhook_deliveries_filtered_total{event="` + r.Event + `",reason="` + r.Reason + `"} 0` + "\n"
	}
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "boardreadyops_webhook_deliveries_filtered_total"); err != nil {
		t.Fatal(err)
	}
}

// filteredCount reads one series of the filter counter.
func filteredCount(t *testing.T, e *env, event, reason string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "boardreadyops_webhook_deliveries_filtered_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ev, re string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "event":
					ev = l.GetValue()
				case "reason":
					re = l.GetValue()
				}
			}
			if ev == event && re == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no filtered series for %s/%s", event, reason)
	return 0
}
