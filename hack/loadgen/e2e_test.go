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
