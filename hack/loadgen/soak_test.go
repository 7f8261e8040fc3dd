package main

import (
	"math"
	"testing"
)

// quantile reads the observations between two scrapes of a histogram, interpolating inside the
// bucket as histogram_quantile does.
func TestQuantileBetweenScrapes(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	before := []bucket{{0.001, 10}, {0.01, 10}, {0.1, 10}, {inf, 10}}
	tests := []struct {
		name  string
		after []bucket
		q     float64
		want  float64
	}{
		{"all in the first bucket", []bucket{{0.001, 110}, {0.01, 110}, {0.1, 110}, {inf, 110}}, 0.5, 0.5},
		{"half way into the second bucket", []bucket{{0.001, 10}, {0.01, 110}, {0.1, 110}, {inf, 110}}, 0.5, 5.5},
		{"p99 in the third bucket", []bucket{{0.001, 60}, {0.01, 60}, {0.1, 110}, {inf, 110}}, 0.99, 98.2},
		{"in +Inf: the highest finite bound", []bucket{{0.001, 10}, {0.01, 10}, {0.1, 10}, {inf, 110}}, 0.99, 100},
		{"nothing observed", before, 0.5, -1},
		{"no histogram", nil, 0.5, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := quantile(before, tt.after, tt.q); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("quantile = %v ms, want %v", got, tt.want)
			}
		})
	}
}
