// Package broker evaluates the external-broker transition triggers (docs/operator.md) for one
// dispatcher: it folds each scrape round's signals (package scrape) into the three trigger
// windows (package trigger) and concludes whether an external broker evaluation is recommended.
// The controller and the local `operator evaluate` mode share it.
package broker

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
	"github.com/boardreadyops/cloud/services/operator/internal/scrape"
	"github.com/boardreadyops/cloud/services/operator/internal/trigger"
)

// Trigger names one of the three triggers.
type Trigger int

// The triggers, in the outbox specification's order.
const (
	ClaimLatency Trigger = iota
	OldestAvailableAge
	Throughput
	numTriggers
)

// Triggers lists every trigger.
var Triggers = [numTriggers]Trigger{ClaimLatency, OldestAvailableAge, Throughput}

// Label is the trigger's value for the metric label "trigger".
func (t Trigger) Label() string {
	return [...]string{"claim_latency", "oldest_available_age", "throughput"}[t]
}

// ConditionType is the trigger's condition on the OutboxMonitor.
func (t Trigger) ConditionType() string {
	return [...]string{v1alpha1.ConditionClaimLatency, v1alpha1.ConditionOldestAvailableAge, v1alpha1.ConditionThroughput}[t]
}

// Settings are the resolved thresholds of one monitor.
type Settings struct {
	// Quantile of the claim duration histogram compared with the latency threshold (0.99).
	Quantile float64
	Rules    [numTriggers]trigger.Config
}

// DefaultSettings are the outbox specification's thresholds with the CRD's default windows:
// claim latency p99 above 250 ms for 5 minutes, oldest available age above 30 s for 5 minutes
// while workers are healthy, throughput above 500 effects/s for 15 minutes; clearing 10 % below
// the threshold for 5 minutes.
func DefaultSettings() Settings {
	rule := func(threshold float64, window time.Duration) trigger.Config {
		return trigger.Config{Threshold: threshold, Window: window, HysteresisPercent: 10, ClearWindow: 5 * time.Minute}
	}
	return Settings{Quantile: 0.99, Rules: [numTriggers]trigger.Config{
		ClaimLatency:       rule(0.25, 5*time.Minute),
		OldestAvailableAge: rule(30, 5*time.Minute),
		Throughput:         rule(500, 15*time.Minute),
	}}
}

// SettingsFromSpec resolves a monitor's spec as the API server stored it (with the CRD defaults
// filled in). The schema refuses a zero threshold, window or percentile and fills in an omitted
// one, so only a spec that never went through the API server (or was stored before the schema
// refused zero windows) has one; it falls back to DefaultSettings.
func SettingsFromSpec(spec v1alpha1.OutboxMonitorSpec) Settings {
	s := DefaultSettings()
	tr := spec.Triggers
	if tr.ClaimLatency.Percentile > 0 {
		s.Quantile = float64(tr.ClaimLatency.Percentile) / 100
	}
	set := func(t Trigger, threshold float64, window time.Duration) {
		if threshold > 0 {
			s.Rules[t].Threshold = threshold
		}
		if window > 0 {
			s.Rules[t].Window = window
		}
	}
	set(ClaimLatency, duration(tr.ClaimLatency.Threshold).Seconds(), duration(tr.ClaimLatency.Window))
	set(OldestAvailableAge, duration(tr.OldestAvailableAge.Threshold).Seconds(), duration(tr.OldestAvailableAge.Window))
	set(Throughput, float64(tr.Throughput.EffectsPerSecond), duration(tr.Throughput.Window))
	for i := range s.Rules {
		// Zero is meaningful for both (clear as soon as below the threshold), and the API server
		// fills in the CRD defaults, so the spec's values are taken as they are.
		s.Rules[i].HysteresisPercent = int(tr.HysteresisPercent)
		if tr.ClearWindow != nil {
			s.Rules[i].ClearWindow = tr.ClearWindow.Duration
		}
	}
	return s
}

// duration is d's value, zero when unset.
func duration(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// Evaluator holds one dispatcher's scrape history and trigger states.
type Evaluator struct {
	agg    *scrape.Aggregator
	States [numTriggers]trigger.State
}

// NewEvaluator returns an evaluator with no history and every trigger inactive.
func NewEvaluator() *Evaluator { return &Evaluator{agg: scrape.NewAggregator()} }

// Result is one evaluation round.
type Result struct {
	Signals        scrape.Signals
	WorkersHealthy bool
	Transitions    [numTriggers]trigger.Transition
}

// Evaluate folds one scrape round into the triggers. Unhealthy dispatchers (their readiness
// fails while they cannot reach the database) still serve their metrics, so while the workers
// are unhealthy:
//   - the age trigger counts nothing: a growing age measures the outage, not the queue. The
//     interval is no data: it restarts a pending window and never clears a fired trigger.
//   - the throughput trigger counts a rate above its threshold, which only load produces:
//     available replicas fall below the desired ones on every autoscaler scale-up and rolling
//     update too, when the load is highest, and such an interval must not restart the window.
//     A rate at or below the threshold is no data, as for the age: a throughput of zero during
//     an outage is no measure of the load and must not clear a fired trigger (as a below-threshold
//     interval would count towards clearing it); it restarts a pending window, as a rate below
//     the threshold does with healthy workers.
func (e *Evaluator) Evaluate(s Settings, now time.Time, samples map[string]scrape.Sample, alive map[string]bool, workersHealthy bool) Result {
	return e.EvaluateSignals(s, e.agg.Update(now, samples, alive, s.Quantile), workersHealthy)
}

// EvaluateSignals folds signals computed elsewhere (a Prometheus server) into the triggers, with
// the same rules as Evaluate.
func (e *Evaluator) EvaluateSignals(s Settings, sig scrape.Signals, workersHealthy bool) Result {
	obs := func(v float64, valid bool) trigger.Observation {
		return trigger.Observation{Start: sig.Start, End: sig.End, Value: v, Valid: valid}
	}
	r := Result{Signals: sig, WorkersHealthy: workersHealthy}
	r.Transitions[ClaimLatency] = e.States[ClaimLatency].Observe(s.Rules[ClaimLatency], obs(sig.ClaimLatency, sig.ClaimLatencyValid))
	r.Transitions[OldestAvailableAge] = e.States[OldestAvailableAge].Observe(s.Rules[OldestAvailableAge], obs(sig.OldestAge, sig.OldestAgeValid && workersHealthy))
	r.Transitions[Throughput] = e.States[Throughput].Observe(s.Rules[Throughput],
		obs(sig.Throughput, sig.ThroughputValid && (workersHealthy || sig.Throughput > s.Rules[Throughput].Threshold)))
	return r
}

// Active lists the triggers that are fired.
func (e *Evaluator) Active() []Trigger {
	var out []Trigger
	for _, t := range Triggers {
		if e.States[t].Active {
			out = append(out, t)
		}
	}
	return out
}

// Describe is a one-line account of a trigger's rule and state, for condition messages, Events
// and the local mode.
func Describe(t Trigger, s Settings, st trigger.State) string {
	r := s.Rules[t]
	var rule string
	switch t {
	case ClaimLatency:
		rule = fmt.Sprintf("claim latency p%.0f above %s for %s", s.Quantile*100, seconds(r.Threshold), r.Window)
	case OldestAvailableAge:
		rule = fmt.Sprintf("oldest available effect age above %s for %s while workers are healthy", seconds(r.Threshold), r.Window)
	case Throughput:
		rule = fmt.Sprintf("throughput above %.0f effects/s for %s (with unhealthy workers only a rate above it counts)", r.Threshold, r.Window)
	}
	observed := "no valid observation in the latest interval"
	if st.LastValid {
		observed = "observed " + format(t, st.Last)
	}
	switch {
	case st.Active:
		return fmt.Sprintf("sustained since %s: %s (%s)", st.Since.UTC().Format(time.RFC3339), rule, observed)
	case !st.AboveSince.IsZero():
		return fmt.Sprintf("above threshold since %s, window not complete: %s (%s)", st.AboveSince.UTC().Format(time.RFC3339), rule, observed)
	default:
		return fmt.Sprintf("not sustained: %s (%s)", rule, observed)
	}
}

func format(t Trigger, v float64) string {
	if t == Throughput {
		return fmt.Sprintf("%.1f effects/s", v)
	}
	return seconds(v)
}

func seconds(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(time.Millisecond).String()
}

// Recommendation is the summary conclusion.
type Recommendation struct {
	Recommended bool
	// Reason is a CamelCase condition reason: NoTriggerSustained, TuningFirst or TriggersSustained.
	Reason  string
	Message string
}

// Recommend concludes from the fired triggers and whether tuning was recorded. Database and
// index tuning must come before a broker is evaluated, so sustained triggers without a tuning
// record recommend tuning, not a broker.
func Recommend(active []Trigger, tuned bool) Recommendation {
	if len(active) == 0 {
		return Recommendation{Reason: "NoTriggerSustained", Message: "no broker-transition trigger is sustained; PostgreSQL remains the queue"}
	}
	names := make([]string, len(active))
	for i, t := range active {
		names[i] = t.ConditionType()
	}
	list := strings.Join(names, ", ")
	if !tuned {
		return Recommendation{Reason: "TuningFirst", Message: "sustained: " + list +
			"; tune the database and its indexes first and record it in spec.tuning: a broker is evaluated only after tuning (docs/operator.md)"}
	}
	return Recommendation{Recommended: true, Reason: "TriggersSustained", Message: "sustained after recorded tuning: " + list +
		"; evaluate an external broker in a separate architecture decision that keeps the transaction boundary, idempotency keys, leases, dead-letter visibility and the dispatch reconciliation rule"}
}
