package main

import (
	"strings"
	"testing"
)

func TestPostgresPerServiceCPU(t *testing.T) {
	t.Parallel()
	all := map[string]float64{"ingest": 25.5, "lifecycle": 22, "outbox-dispatcher": 28.5, "githubsim": 30, "postgres": 179.1}
	tests := []struct {
		name string
		cpu  map[string]float64
		want float64
		ok   bool
	}{
		{"the three services, not the simulator", all, 179.1 / 76, true},
		{"no PostgreSQL", map[string]float64{"ingest": 1, "lifecycle": 1, "outbox-dispatcher": 1}, 0, false},
		{"a service missing", map[string]float64{"ingest": 1, "lifecycle": 1, "postgres": 3}, 0, false},
		{"every dispatcher replica", map[string]float64{"ingest": 1, "lifecycle": 1, "outbox-dispatcher": 1, "outbox-dispatcher-2": 2, "outbox-dispatcher-x": 5, "postgres": 10}, 2, true},
		{"no service CPU", map[string]float64{"ingest": 0, "lifecycle": 0, "outbox-dispatcher": 0, "postgres": 3}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := postgresPerServiceCPU(tt.cpu)
			if ok != tt.ok || (ok && (got-tt.want > 1e-9 || tt.want-got > 1e-9)) {
				t.Fatalf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	if s := formatCPU(all, 149.2, 50000); !strings.HasSuffix(s, "; PostgreSQL per service CPU 2.36") {
		t.Fatalf("formatCPU: %s", s)
	}
}

// Each process's wait for a core is shown per second of its CPU, by name; one without CPU is left
// out rather than divided by zero.
func TestFormatRunQueue(t *testing.T) {
	t.Parallel()
	wait := map[string]float64{"postgres": 90, "ingest": 10, "loadgen": 1}
	cpu := map[string]float64{"postgres": 100, "ingest": 20, "loadgen": 0}
	if got, want := formatRunQueue(wait, cpu), "ingest 0.50, postgres 0.90"; got != want {
		t.Fatalf("formatRunQueue = %q, want %q", got, want)
	}
}
