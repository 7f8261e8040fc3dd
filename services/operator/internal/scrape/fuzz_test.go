package scrape

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// FuzzParse feeds arbitrary expositions to the parser: a metrics endpoint is untrusted input
// (any pod matching the selector answers it). It must never panic, and a parsed sample must keep
// its buckets sorted.
func FuzzParse(f *testing.F) {
	f.Add("# TYPE boardreadyops_outbox_claim_duration_seconds histogram\nboardreadyops_outbox_claim_duration_seconds_bucket{le=\"0.25\"} 3\nboardreadyops_outbox_claim_duration_seconds_bucket{le=\"+Inf\"} 4\nboardreadyops_outbox_claim_duration_seconds_sum 1\nboardreadyops_outbox_claim_duration_seconds_count 4\n")
	f.Add("boardreadyops_outbox_effects_processed_total{outcome=\"completed\"} 1e9\n")
	f.Add("up 1\n")
	f.Fuzz(func(t *testing.T, body string) {
		s, err := Parse(strings.NewReader(body), expfmt.NewFormat(expfmt.TypeTextPlain), t0)
		if err != nil {
			return
		}
		for i := 1; i < len(s.ClaimBuckets); i++ {
			if s.ClaimBuckets[i-1].UpperBound >= s.ClaimBuckets[i].UpperBound {
				t.Fatalf("buckets not sorted: %+v", s.ClaimBuckets)
			}
		}
		_, _ = Quantile(0.99, s.ClaimBuckets)
	})
}
