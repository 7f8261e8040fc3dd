package trigger

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// series builds back-to-back observations of step length from values; NaN-free, and a negative
// value stands for an invalid observation.
func series(step time.Duration, values ...float64) []Observation {
	out := make([]Observation, len(values))
	for i, v := range values {
		start := t0.Add(time.Duration(i) * step)
		out[i] = Observation{Start: start, End: start.Add(step), Value: v, Valid: v >= 0}
	}
	return out
}

func TestObserve(t *testing.T) {
	t.Parallel()
	cfg := Config{Threshold: 100, Window: 3 * time.Minute, HysteresisPercent: 10, ClearWindow: 2 * time.Minute}
	tests := []struct {
		name   string
		values []float64
		// want is the transition after each observation: '.' unchanged, 'F' fired, 'C' cleared.
		want       string
		wantActive bool
	}{
		{name: "below threshold never fires", values: []float64{50, 99, 100, 80}, want: "....", wantActive: false},
		{name: "fires only after the full window", values: []float64{150, 150, 150, 150}, want: "..F.", wantActive: true},
		{name: "a dip restarts the window", values: []float64{150, 150, 90, 150, 150, 150}, want: ".....F", wantActive: true},
		{name: "a gap restarts the window", values: []float64{150, 150, -1, 150, 150, 150}, want: ".....F", wantActive: true},
		{name: "a gap never clears", values: []float64{150, 150, 150, -1, -1, -1, -1}, want: "..F....", wantActive: true},
		{name: "clears after the clear window below the band", values: []float64{150, 150, 150, 80, 80}, want: "..F.C", wantActive: false},
		{name: "hysteresis band holds a fired trigger", values: []float64{150, 150, 150, 95, 95, 95, 95}, want: "..F....", wantActive: true},
		{name: "exactly at the clear level counts as below", values: []float64{150, 150, 150, 90, 90}, want: "..F.C", wantActive: false},
		{name: "band visit restarts the clear window", values: []float64{150, 150, 150, 80, 95, 80, 80}, want: "..F...C", wantActive: false},
		{name: "refires after clearing", values: []float64{150, 150, 150, 0, 0, 150, 150, 150}, want: "..F.C..F", wantActive: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s State
			got := make([]byte, 0, len(tt.values))
			for _, o := range series(time.Minute, tt.values...) {
				got = append(got, ".FC"[s.Observe(cfg, o)])
			}
			if string(got) != tt.want || s.Active != tt.wantActive {
				t.Fatalf("transitions %q active %v, want %q active %v", got, s.Active, tt.want, tt.wantActive)
			}
		})
	}
}

func TestObserveSinceTimes(t *testing.T) {
	t.Parallel()
	cfg := Config{Threshold: 1, Window: 2 * time.Minute, ClearWindow: time.Minute}
	var s State
	obs := series(time.Minute, 2, 2, 0)
	s.Observe(cfg, obs[0])
	if s.AboveSince != t0 {
		t.Fatalf("AboveSince = %v, want the first interval's start %v", s.AboveSince, t0)
	}
	if s.Observe(cfg, obs[1]) != Fired || !s.Since.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("fired at %v, want %v", s.Since, t0.Add(2*time.Minute))
	}
	if s.Observe(cfg, obs[2]) != Cleared || !s.Since.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("cleared at %v, want %v", s.Since, t0.Add(3*time.Minute))
	}
}

func TestZeroWindowFiresOnFirstObservation(t *testing.T) {
	t.Parallel()
	var s State
	if got := s.Observe(Config{Threshold: 1}, series(time.Second, 5)[0]); got != Fired {
		t.Fatalf("got %v, want Fired", got)
	}
}
