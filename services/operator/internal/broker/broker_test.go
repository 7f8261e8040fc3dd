package broker

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
	"github.com/boardreadyops/cloud/services/operator/internal/scrape"
	"github.com/boardreadyops/cloud/services/operator/internal/trigger"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// pod builds one dispatcher pod's cumulative sample after `at`: claims of which slow took 1 s,
// completed effects, and the oldest available age.
func pod(at time.Duration, claims, slow, completed, age float64) scrape.Sample {
	inf := math.Inf(1)
	return scrape.Sample{Time: t0.Add(at), ClaimCount: claims,
		ClaimBuckets: []scrape.Bucket{{UpperBound: 0.01, Count: claims - slow}, {UpperBound: 0.25, Count: claims - slow}, {UpperBound: 2.5, Count: claims}, {UpperBound: inf, Count: claims}},
		Completed:    completed, OldestAge: age, HasOldestAge: true}
}

func TestEvaluatorOverSyntheticSeries(t *testing.T) {
	t.Parallel()
	settings := DefaultSettings()
	step := time.Minute
	type round struct {
		claims, slow, completed, age float64 // per-interval increments (claims, slow, completed), gauge (age)
		healthy                      bool
		restart                      bool // the pod restarted: its counters start from zero
	}
	tests := []struct {
		name    string
		trigger Trigger
		rounds  []round
		// want: the trigger's transitions per round: '.', 'F' fired, 'C' cleared.
		want string
	}{
		{
			name: "throughput fires only after 15 minutes above 500/s", trigger: Throughput,
			rounds: repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 17),
			want:   "...............F.", // round 0 has no interval; rounds 1..15 are 15 minutes
		},
		{
			name: "throughput survives a counter reset", trigger: Throughput,
			rounds: append(append(repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 8),
				round{claims: 100, completed: 600 * 60, healthy: true, restart: true}),
				repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 8)...),
			want: "...............F.",
		},
		{
			name: "claim latency fires after 5 minutes of slow claims", trigger: ClaimLatency,
			rounds: repeat(round{claims: 100, slow: 10, healthy: true}, 7),
			want:   ".....F.",
		},
		{
			name: "claim latency clears with hysteresis", trigger: ClaimLatency,
			rounds: append(repeat(round{claims: 100, slow: 10, healthy: true}, 6), repeat(round{claims: 100, healthy: true}, 6)...),
			want:   ".....F....C.",
		},
		{
			name: "age fires while workers are healthy", trigger: OldestAvailableAge,
			rounds: repeat(round{claims: 1, age: 45, healthy: true}, 7),
			want:   ".....F.",
		},
		{
			name: "unhealthy workers restart the age window", trigger: OldestAvailableAge,
			rounds: append(append(repeat(round{claims: 1, age: 45, healthy: true}, 4), round{claims: 1, age: 45}),
				repeat(round{claims: 1, age: 45, healthy: true}, 6)...),
			want: ".........F.", // the unhealthy interval ends at minute 4; intervals 5..9 are 5 healthy minutes
		},
		{
			// Dispatchers that cannot reach the database fail their readiness and complete nothing,
			// but still serve their metrics: a throughput of 0 then is no measure of the load.
			name: "unhealthy workers do not clear a fired throughput trigger", trigger: Throughput,
			rounds: append(repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 16), repeat(round{}, 8)...),
			want:   "...............F........", // healthy, the 5-minute clear window would end at round 20
		},
		{
			// An outage interval (unhealthy workers completing nothing) is no data: the window
			// restarts, as it would at a healthy rate below the threshold.
			name: "an outage restarts the throughput window", trigger: Throughput,
			rounds: append(append(repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 10), round{}),
				repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 16)...),
			want: ".........................F.", // intervals 11..25 are the 15 healthy minutes after the outage
		},
		{
			// An autoscaler scale-up (or a rolling update) leaves available replicas below the
			// desired ones for minutes while the load is high: a rate above the threshold counts
			// with unhealthy workers, so the window runs on as if they had been healthy.
			name: "a scale-up under high throughput does not restart the window", trigger: Throughput,
			rounds: append(append(repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 6), repeat(round{claims: 100, completed: 600 * 60}, 4)...),
				repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 7)...),
			want: "...............F.", // rounds 1..15 are 15 minutes above the threshold, 4 of them scaling up
		},
		{
			// A rate at or below the threshold with unhealthy workers is no data, not a low rate:
			// a fired trigger neither clears nor counts such intervals towards its clear window.
			name: "a low rate with unhealthy workers does not count towards clearing", trigger: Throughput,
			rounds: append(append(append(repeat(round{claims: 100, completed: 600 * 60, healthy: true}, 16),
				repeat(round{claims: 100, completed: 100 * 60, healthy: true}, 3)...), repeat(round{claims: 100, completed: 100 * 60}, 3)...),
				repeat(round{claims: 100, completed: 100 * 60, healthy: true}, 6)...),
			// Healthy, rounds 16..20 would be the 5-minute clear window; the unhealthy rounds 19..21
			// restart it, and rounds 22..26 are the 5 healthy minutes at the low rate after them.
			want: "...............F..........C.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := NewEvaluator()
			var claims, slow, completed float64
			got := ""
			for i, r := range tt.rounds {
				if r.restart {
					claims, slow, completed = 0, 0, 0
				}
				claims, slow, completed = claims+r.claims, slow+r.slow, completed+r.completed
				at := time.Duration(i) * step
				res := e.Evaluate(settings, t0.Add(at), map[string]scrape.Sample{"pod": pod(at, claims, slow, completed, r.age)},
					map[string]bool{"pod": true}, r.healthy)
				got += string(".FC"[res.Transitions[tt.trigger]])
			}
			if got != tt.want {
				t.Fatalf("transitions %q, want %q", got, tt.want)
			}
		})
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestNoFalseTriggerFromScrapeFailures(t *testing.T) {
	t.Parallel()
	// A pod that misses scrapes for ten minutes and then answers with a large cumulative count
	// is diffed over its real interval: 500 effects/s × 600 s is 500/s, not 300,000/s.
	settings := DefaultSettings()
	settings.Rules[Throughput].Window = 0
	e := NewEvaluator()
	alive := map[string]bool{"pod": true}
	e.Evaluate(settings, t0, map[string]scrape.Sample{"pod": pod(0, 1, 0, 0, 0)}, alive, true)
	for i := 1; i < 10; i++ {
		e.Evaluate(settings, t0.Add(time.Duration(i)*time.Minute), nil, alive, true)
	}
	res := e.Evaluate(settings, t0.Add(10*time.Minute), map[string]scrape.Sample{"pod": pod(10*time.Minute, 2, 0, 500*600, 0)}, alive, true)
	if res.Transitions[Throughput] != trigger.Unchanged || res.Signals.Throughput != 500 {
		t.Fatalf("throughput %v transition %v", res.Signals.Throughput, res.Transitions[Throughput])
	}
}

func TestSettingsFromSpec(t *testing.T) {
	t.Parallel()
	spec := v1alpha1.OutboxMonitorSpec{Triggers: v1alpha1.Triggers{
		ClaimLatency:      v1alpha1.ClaimLatencyTrigger{Threshold: &metav1.Duration{Duration: 100 * time.Millisecond}, Percentile: 95, Window: &metav1.Duration{Duration: time.Minute}},
		Throughput:        v1alpha1.ThroughputTrigger{EffectsPerSecond: 50},
		HysteresisPercent: 20, ClearWindow: &metav1.Duration{Duration: 30 * time.Second},
	}}
	s := SettingsFromSpec(spec)
	if s.Quantile != 0.95 || s.Rules[ClaimLatency].Threshold != 0.1 || s.Rules[ClaimLatency].Window != time.Minute {
		t.Fatalf("claim latency settings %+v quantile %v", s.Rules[ClaimLatency], s.Quantile)
	}
	if s.Rules[Throughput].Threshold != 50 || s.Rules[Throughput].Window != 15*time.Minute {
		t.Fatalf("throughput settings %+v", s.Rules[Throughput])
	}
	if s.Rules[OldestAvailableAge].Threshold != 30 || s.Rules[OldestAvailableAge].HysteresisPercent != 20 || s.Rules[OldestAvailableAge].ClearWindow != 30*time.Second {
		t.Fatalf("age settings %+v", s.Rules[OldestAvailableAge])
	}
}

func TestRecommend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		active      []Trigger
		tuned       bool
		recommended bool
		reason      string
	}{
		{nil, false, false, "NoTriggerSustained"},
		{nil, true, false, "NoTriggerSustained"},
		{[]Trigger{Throughput}, false, false, "TuningFirst"},
		{[]Trigger{ClaimLatency, Throughput}, true, true, "TriggersSustained"},
	}
	for _, tt := range tests {
		r := Recommend(tt.active, tt.tuned)
		if r.Recommended != tt.recommended || r.Reason != tt.reason {
			t.Errorf("Recommend(%v, %v) = %+v", tt.active, tt.tuned, r)
		}
		for _, a := range tt.active {
			if !strings.Contains(r.Message, a.ConditionType()) {
				t.Errorf("message %q does not name %s", r.Message, a.ConditionType())
			}
		}
	}
}
