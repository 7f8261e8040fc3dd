package queuerun_test

import (
	"math"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/queuerun"
)

func TestBackoffDoublesUpToTheCapWithJitter(t *testing.T) {
	t.Parallel()
	half := func() float64 { return 0.5 } // the middle of the jitter range: no spread
	tests := []struct {
		name     string
		b        queuerun.Backoff
		attempts int
		want     time.Duration
	}{
		{"first attempt waits the base", queuerun.Backoff{Base: time.Second, Max: time.Minute, Jitter: 0.2, Rand: half}, 1, time.Second},
		{"no attempt yet counts as the first", queuerun.Backoff{Base: time.Second, Max: time.Minute, Jitter: 0.2, Rand: half}, 0, time.Second},
		{"each attempt doubles", queuerun.Backoff{Base: 2 * time.Second, Max: time.Minute, Jitter: 0.2, Rand: half}, 4, 16 * time.Second},
		{"capped at max", queuerun.Backoff{Base: time.Second, Max: 5 * time.Minute, Jitter: 0.2, Rand: half}, 12, 5 * time.Minute},
		{"overflow is capped too", queuerun.Backoff{Base: time.Hour, Max: 10 * time.Minute, Jitter: 0.2, Rand: half}, math.MaxInt, 10 * time.Minute},
		{"lowest jitter", queuerun.Backoff{Base: 10 * time.Second, Max: time.Hour, Jitter: 0.2, Rand: func() float64 { return 0 }}, 1, 8 * time.Second},
		{"highest jitter", queuerun.Backoff{Base: 10 * time.Second, Max: time.Hour, Jitter: 0.2, Rand: func() float64 { return 1 }}, 1, 12 * time.Second},
		{"jitter applies to the cap", queuerun.Backoff{Base: time.Second, Max: 10 * time.Second, Jitter: 0.2, Rand: func() float64 { return 0 }}, 30, 8 * time.Second},
		{"no jitter", queuerun.Backoff{Base: time.Second, Max: time.Hour, Rand: func() float64 { return 0.99 }}, 3, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.b.Delay(tt.attempts); got.Round(time.Millisecond) != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.attempts, got, tt.want)
			}
		})
	}
}

// Without an injected source the delays spread over the whole jitter range and stay inside it.
func TestBackoffDefaultRandomSource(t *testing.T) {
	t.Parallel()
	b := queuerun.Backoff{Base: 10 * time.Second, Max: time.Hour, Jitter: 0.2}
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := b.Delay(1)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 8*time.Second || hi > 12*time.Second || hi-lo < 2*time.Second {
		t.Fatalf("1000 delays spread from %v to %v, want inside 8s to 12s and spread over at least 2s", lo, hi)
	}
}
