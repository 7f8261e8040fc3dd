package controller

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
	"github.com/boardreadyops/cloud/services/operator/internal/broker"
	"github.com/boardreadyops/cloud/services/operator/internal/trigger"
)

// setStatus writes one evaluation into the monitor's status. Conditions keep their
// lastTransitionTime while their status is unchanged, so it is the trigger's "since".
func (r *Reconciler) setStatus(mon *v1alpha1.OutboxMonitor, eval *broker.Evaluator, settings broker.Settings, res broker.Result,
	rec broker.Recommendation, workers workerStatus, scrapeErrs []string, now time.Time) {
	gen := mon.Generation
	set := func(typ string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&mon.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg, 1024), ObservedGeneration: gen,
		})
	}
	for _, t := range broker.Triggers {
		st := eval.States[t]
		set(t.ConditionType(), st.Active, triggerReason(t, st, res.WorkersHealthy), broker.Describe(t, settings, st))
	}
	set(v1alpha1.ConditionWorkersHealthy, workers.healthy, workers.reason, workers.message)
	set(v1alpha1.ConditionBrokerEvaluationRecommended, rec.Recommended, rec.Reason, rec.Message)

	sig := res.Signals
	obs := &v1alpha1.ObservedSignals{PodsScraped: int32(sig.PodsScraped), ReadyWorkers: workers.ready, DesiredWorkers: workers.desired}
	if sig.ClaimLatencyValid {
		obs.ClaimLatencyMilliseconds = ptr.To(int64(math.Round(sig.ClaimLatency * 1000)))
	}
	if sig.OldestAgeValid {
		obs.OldestAvailableAgeSeconds = ptr.To(int64(math.Round(sig.OldestAge)))
	}
	if sig.ThroughputValid {
		obs.EffectsPerSecond = ptr.To(int64(math.Round(sig.Throughput)))
	}
	mon.Status.Observed = obs
	t := metav1.NewTime(now)
	mon.Status.LastScrapeTime = &t
	if len(scrapeErrs) > maxScrapeErrors {
		scrapeErrs = scrapeErrs[:maxScrapeErrors]
	}
	for i := range scrapeErrs {
		scrapeErrs[i] = truncate(scrapeErrs[i], 512)
	}
	mon.Status.ScrapeErrors = scrapeErrs
	mon.Status.ObservedGeneration = gen
}

// triggerReason is a trigger condition's reason. With unhealthy workers the age trigger counts
// nothing, and the throughput trigger only a rate above its threshold (broker.Evaluate): its
// window pending through a scale-up reads WindowPending, not WorkersUnhealthy.
func triggerReason(t broker.Trigger, st trigger.State, workersHealthy bool) string {
	switch {
	case st.Active:
		return "Sustained"
	case t == broker.OldestAvailableAge && !workersHealthy:
		return "WorkersUnhealthy"
	case t == broker.Throughput && !workersHealthy && st.AboveSince.IsZero():
		return "WorkersUnhealthy"
	case !st.LastValid:
		return "NoData"
	case !st.AboveSince.IsZero():
		return "WindowPending"
	default:
		return "BelowThreshold"
	}
}

// emitEvents records an Event for each trigger that fired or cleared and for each change of the
// recommendation.
func (r *Reconciler) emitEvents(mon *v1alpha1.OutboxMonitor, eval *broker.Evaluator, settings broker.Settings, res broker.Result,
	rec broker.Recommendation, wasRecommended bool) {
	if r.Recorder == nil {
		return
	}
	for _, t := range broker.Triggers {
		switch res.Transitions[t] {
		case trigger.Fired:
			r.Recorder.Eventf(mon, nil, corev1.EventTypeWarning, "TriggerSustained", "Evaluate", "%s %s", t.ConditionType(), broker.Describe(t, settings, eval.States[t]))
		case trigger.Cleared:
			r.Recorder.Eventf(mon, nil, corev1.EventTypeNormal, "TriggerCleared", "Evaluate", "%s %s", t.ConditionType(), broker.Describe(t, settings, eval.States[t]))
		}
		if res.Transitions[t] == trigger.Fired && !rec.Recommended {
			r.Recorder.Eventf(mon, nil, corev1.EventTypeWarning, "TuningFirst", "Evaluate", "%s", rec.Message)
		}
	}
	switch {
	case rec.Recommended && !wasRecommended:
		r.Recorder.Eventf(mon, nil, corev1.EventTypeWarning, "BrokerEvaluationRecommended", "Evaluate", "%s", rec.Message)
	case !rec.Recommended && wasRecommended:
		r.Recorder.Eventf(mon, nil, corev1.EventTypeNormal, "BrokerEvaluationNotRecommended", "Evaluate", "%s", rec.Message)
	}
}

// snapshot is what the metrics need of one monitor, copied out under the reconciler's lock so
// that computing the gauges never reads a monitor's state while another reconcile changes it.
type snapshot struct {
	active      [len(broker.Triggers)]bool
	recommended bool
}

// publishMetrics records the monitor's snapshot (nil forgets it) and sets the gauges: a trigger
// is active when it is active on any monitor this process evaluates.
func (r *Reconciler) publishMetrics(key types.NamespacedName, snap *snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snapshots == nil {
		r.snapshots = map[types.NamespacedName]snapshot{}
	}
	if snap == nil {
		delete(r.snapshots, key)
	} else {
		r.snapshots[key] = *snap
	}
	var total snapshot
	for _, s := range r.snapshots {
		for i := range total.active {
			total.active[i] = total.active[i] || s.active[i]
		}
		total.recommended = total.recommended || s.recommended
	}
	for _, t := range broker.Triggers {
		r.Metrics.triggerActive.WithLabelValues(t.Label()).Set(boolGauge(total.active[t]))
	}
	r.Metrics.recommended.Set(boolGauge(total.recommended))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
