package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// perClaim divides what the claims brought (every label of the counter) by the claims made.
func TestPerClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		metrics string
		want    float64
	}{
		{"labelled counter over claims", `# TYPE boardreadyops_outbox_effects_processed_total counter
boardreadyops_outbox_effects_processed_total{effect_type="github.check_run.create",outcome="completed"} 30
boardreadyops_outbox_effects_processed_total{effect_type="github.workflow.dispatch",outcome="completed"} 10
boardreadyops_outbox_claim_duration_seconds_bucket{le="+Inf"} 8
boardreadyops_outbox_claim_duration_seconds_sum 0.04
boardreadyops_outbox_claim_duration_seconds_count 8
`, 5},
		{"no claim yet", "boardreadyops_outbox_claim_duration_seconds_count 0\n", -1},
		{"no histogram", "boardreadyops_outbox_effects_processed_total{outcome=\"completed\"} 3\n", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, tt.metrics) }))
			defer srv.Close()
			got := perClaim(srv.URL, "boardreadyops_outbox_effects_processed_total", "boardreadyops_outbox_claim_duration_seconds")
			if got != tt.want {
				t.Fatalf("perClaim = %v, want %v", got, tt.want)
			}
		})
	}
	if got := perClaim("http://127.0.0.1:1/metrics", "a", "b"); got != -1 {
		t.Fatalf("unreachable endpoint: perClaim = %v, want -1", got)
	}
}

// Over several replicas the figures are of all of them together: their counts and their claim
// latency buckets are added, and one unreadable replica makes the figure unknown.
func TestReplicasAdded(t *testing.T) {
	t.Parallel()
	serve := func(metrics string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, metrics) }))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	fast := serve(`boardreadyops_outbox_effects_processed_total{outcome="completed"} 90
boardreadyops_outbox_claim_duration_seconds_bucket{le="0.001"} 99
boardreadyops_outbox_claim_duration_seconds_bucket{le="0.01"} 100
boardreadyops_outbox_claim_duration_seconds_bucket{le="+Inf"} 100
boardreadyops_outbox_claim_duration_seconds_count 100
`)
	slow := serve(`boardreadyops_outbox_effects_processed_total{outcome="completed"} 10
boardreadyops_outbox_claim_duration_seconds_bucket{le="0.001"} 0
boardreadyops_outbox_claim_duration_seconds_bucket{le="0.01"} 50
boardreadyops_outbox_claim_duration_seconds_bucket{le="+Inf"} 100
boardreadyops_outbox_claim_duration_seconds_count 100
`)
	both := fast + "," + slow
	if got := perClaim(both, "boardreadyops_outbox_effects_processed_total", "boardreadyops_outbox_claim_duration_seconds"); got != 0.5 {
		t.Fatalf("perClaim over two replicas = %v, want 100 effects / 200 claims", got)
	}
	// 99 of 200 claims within 1 ms, 150 within 10 ms: p50 10 ms, p99 beyond the last bound.
	if p50, p99 := scrapeClaimQuantiles(both); p50 != 10 || p99 != 1e12 {
		t.Fatalf("claim quantiles over two replicas = %v, %v ms, want 10 and 1e12 (+Inf)", p50, p99)
	}
	if p50, p99 := scrapeClaimQuantiles(fast); p50 != 1 || p99 != 1 {
		t.Fatalf("claim quantiles of one replica = %v, %v ms, want 1 and 1", p50, p99)
	}
	if got := sumOver(fast+",http://127.0.0.1:1/metrics", func(url string) float64 {
		return scrapeCounter(url, "boardreadyops_outbox_claim_duration_seconds_count ")
	}); got != -1 {
		t.Fatalf("sum with an unreachable replica = %v, want -1", got)
	}
}
