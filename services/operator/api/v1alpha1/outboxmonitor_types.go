package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Condition types set on an OutboxMonitor's status.
const (
	// ConditionClaimLatency is True while the dispatchers' claim latency percentile has stayed
	// above its threshold for the whole window.
	ConditionClaimLatency = "ClaimLatencySustained"
	// ConditionOldestAvailableAge is True while the oldest available effect has stayed older than
	// its threshold for the whole window, counting only time in which the workers were healthy.
	ConditionOldestAvailableAge = "OldestAvailableAgeSustained"
	// ConditionThroughput is True while completed effects per second have stayed above the
	// threshold for the whole window; with unhealthy workers only a rate above the threshold
	// counts (a scale-up under load), and a lower one is no data (an outage).
	ConditionThroughput = "ThroughputSustained"
	// ConditionWorkersHealthy is True while every desired dispatcher replica is available.
	ConditionWorkersHealthy = "WorkersHealthy"
	// ConditionBrokerEvaluationRecommended is the summary: True when at least one trigger is
	// sustained and the database and index tuning that must come first (spec.tuning) has been
	// recorded.
	ConditionBrokerEvaluationRecommended = "BrokerEvaluationRecommended"
)

// AnnotationDeleteWithDispatcher, set to "true" on an OutboxMonitor, has the operator add an owner
// reference from the monitor to the dispatcher Deployment it watches, so that the garbage
// collector deletes the monitor with that Deployment. The chart sets it on the release's monitor:
// a Helm hook (its CRD is created by the same release), which helm uninstall never deletes.
const AnnotationDeleteWithDispatcher = "boardreadyops.io/delete-with-dispatcher"

// OutboxMonitorSpec names the outbox-dispatcher to watch and the thresholds of the three
// broker-transition triggers. The defaults: claim latency p99 above 250ms for 5m, the oldest
// available effect older than 30s for 5m while the workers are healthy, more than 500 completed
// effects per second for 15m. See https://github.com/boardreadyops/cloud/blob/main/docs/operator.md.
type OutboxMonitorSpec struct {
	// Dispatcher identifies the outbox-dispatcher Deployment and how to scrape its pods.
	Dispatcher DispatcherTarget `json:"dispatcher"`

	// ScrapeInterval is how often the dispatcher pods' metrics are scraped and the triggers
	// evaluated.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="scrapeInterval must be between 1s and 10m"
	// +optional
	ScrapeInterval *metav1.Duration `json:"scrapeInterval,omitempty"`

	// Triggers holds the thresholds and windows of the three triggers.
	// +kubebuilder:default={}
	// +optional
	Triggers Triggers `json:"triggers,omitempty"`

	// Prometheus, when set, reads the signals from a Prometheus server's HTTP API instead of
	// scraping the dispatcher pods (for clusters where the operator may not reach the pods, or
	// where Prometheus already aggregates many of them). Worker health still comes from the
	// Deployment.
	// +optional
	Prometheus *PrometheusSource `json:"prometheus,omitempty"`

	// Tuning records that database and index tuning was done, which must come before an external
	// broker is evaluated. Until it is set, sustained triggers are reported but the
	// BrokerEvaluationRecommended condition stays False with reason TuningFirst.
	// +optional
	Tuning *TuningRecord `json:"tuning,omitempty"`
}

// DispatcherTarget identifies the dispatcher Deployment and its metrics endpoint.
type DispatcherTarget struct {
	// DeploymentName is the outbox-dispatcher Deployment in the monitor's namespace. Its ready
	// replicas decide whether the workers are healthy, and its selector finds the pods to scrape
	// unless PodSelector is set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DeploymentName string `json:"deploymentName"`

	// PodSelector overrides the Deployment's selector for finding the pods to scrape.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// MetricsPort is the pods' metrics port: a container port name or a number.
	// +kubebuilder:default="metrics"
	// +kubebuilder:validation:XIntOrString
	// +optional
	MetricsPort *intstr.IntOrString `json:"metricsPort,omitempty"`

	// MetricsPath is the HTTP path of the metrics endpoint.
	// +kubebuilder:default="/metrics"
	// +kubebuilder:validation:Pattern=`^/[A-Za-z0-9/._-]*$`
	// +optional
	MetricsPath string `json:"metricsPath,omitempty"`
}

// PrometheusSource is a Prometheus server holding the dispatcher's metrics.
type PrometheusSource struct {
	// URL is the server's base URL; queries go to <url>/api/v1/query.
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	URL string `json:"url"`
	// Selector is the PromQL label matchers that select this dispatcher's series, without braces,
	// e.g. namespace="boardreadyops",job="brops-boardreadyops-outbox-dispatcher-metrics": the
	// chart's ServiceMonitor leaves the metrics Service's name in job and sets service to the
	// pod's component (outbox-dispatcher, the same for every release in the namespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector"`
	// RateWindow is the range of the rate() and histogram_quantile() queries; at least twice
	// Prometheus's scrape interval.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('1h')",message="rateWindow must be between 10s and 1h"
	// +optional
	RateWindow *metav1.Duration `json:"rateWindow,omitempty"`
}

// Triggers holds the three broker-transition triggers (claim latency above 250ms, oldest available
// effect older than 30s, more than 500 effects per second, by default) and how a fired trigger
// clears. See https://github.com/boardreadyops/cloud/blob/main/docs/operator.md.
type Triggers struct {
	// ClaimLatency fires when the claim latency percentile (p99) stays above the threshold
	// (250ms) for the window (5m).
	// +kubebuilder:default={}
	// +optional
	ClaimLatency ClaimLatencyTrigger `json:"claimLatency,omitempty"`

	// OldestAvailableAge fires when the oldest available effect stays older than the threshold
	// (30s) for the window (5m) while the workers are healthy.
	// +kubebuilder:default={}
	// +optional
	OldestAvailableAge AgeTrigger `json:"oldestAvailableAge,omitempty"`

	// Throughput fires when completed effects per second stay above the threshold (500) for the
	// window (15m); while the workers are unhealthy only a rate above it counts (a scale-up under
	// load), and a lower one is no data (an outage).
	// +kubebuilder:default={}
	// +optional
	Throughput ThroughputTrigger `json:"throughput,omitempty"`

	// HysteresisPercent: a fired trigger clears only once its signal has stayed at or below
	// threshold × (100 − HysteresisPercent) / 100 for ClearWindow, so that a signal hovering at
	// the threshold does not flap.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=90
	// +optional
	HysteresisPercent int32 `json:"hysteresisPercent,omitempty"`

	// ClearWindow is how long a fired trigger's signal must stay below the hysteresis band
	// before the trigger clears.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="clearWindow must be between 0s and 24h"
	// +optional
	ClearWindow *metav1.Duration `json:"clearWindow,omitempty"`
}

// ClaimLatencyTrigger fires when the claim latency remains above 250 milliseconds (the default
// threshold) for the window. See https://github.com/boardreadyops/cloud/blob/main/docs/operator.md.
type ClaimLatencyTrigger struct {
	// Threshold is the claim latency above which the trigger counts (default 250ms).
	// +kubebuilder:default="250ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="threshold must be above 0 and at most 1h"
	// +optional
	Threshold *metav1.Duration `json:"threshold,omitempty"`

	// Percentile of the claim duration histogram (across all dispatcher pods) compared with the
	// threshold.
	// +kubebuilder:default=99
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=99
	// +optional
	Percentile int32 `json:"percentile,omitempty"`

	// Window is how long the latency must stay above the threshold before the trigger fires.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="window must be above 0 and at most 24h"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// AgeTrigger fires when the oldest available effect's age remains above 30 seconds (the default
// threshold) for the window while the workers are healthy. See https://github.com/boardreadyops/cloud/blob/main/docs/operator.md.
type AgeTrigger struct {
	// Threshold is the oldest available effect age above which the trigger counts (default 30s).
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="threshold must be above 0 and at most 24h"
	// +optional
	Threshold *metav1.Duration `json:"threshold,omitempty"`

	// Window is how long the age must stay above the threshold, with healthy workers, before
	// the trigger fires. A period with unhealthy workers restarts the window.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="window must be above 0 and at most 24h"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// ThroughputTrigger fires when the throughput remains above 500 effects per second (the default
// threshold) for 15 minutes (the default window). See https://github.com/boardreadyops/cloud/blob/main/docs/operator.md.
type ThroughputTrigger struct {
	// EffectsPerSecond is the completed-effects rate, summed across dispatcher pods, above which
	// the trigger counts (default 500).
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=1
	// +optional
	EffectsPerSecond int32 `json:"effectsPerSecond,omitempty"`

	// Window is how long the rate must stay above the threshold before the trigger fires. While
	// the workers are unhealthy a rate above it still counts (a scale-up under load); a lower one
	// (workers that complete nothing while they cannot reach the database) is no data: it
	// restarts the window and never clears a fired trigger.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="window must be above 0 and at most 24h"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// TuningRecord is the record required before a broker is evaluated: who tuned the database and
// its indexes, when, and what was done.
type TuningRecord struct {
	// CompletedBy names who did the tuning.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	CompletedBy string `json:"completedBy"`
	// CompletedAt is when the tuning was finished.
	CompletedAt metav1.Time `json:"completedAt"`
	// Notes say what was tuned (indexes, autovacuum, connection pool, hardware…).
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Notes string `json:"notes,omitempty"`
}

// ObservedSignals are the figures of the latest evaluation. A nil field means the signal could
// not be computed from that scrape (no claims in the interval, no pod scraped twice yet, …).
type ObservedSignals struct {
	// ClaimLatencyMilliseconds is the configured claim latency percentile over the last interval.
	// +optional
	ClaimLatencyMilliseconds *int64 `json:"claimLatencyMilliseconds,omitempty"`
	// OldestAvailableAgeSeconds is the largest oldest-available-effect age any pod reported.
	// +optional
	OldestAvailableAgeSeconds *int64 `json:"oldestAvailableAgeSeconds,omitempty"`
	// EffectsPerSecond is the completed-effects rate summed across pods over the last interval.
	// +optional
	EffectsPerSecond *int64 `json:"effectsPerSecond,omitempty"`
	// PodsScraped is how many pods answered the last scrape.
	PodsScraped int32 `json:"podsScraped"`
	// ReadyWorkers and DesiredWorkers are the Deployment's available and desired replicas.
	ReadyWorkers   int32 `json:"readyWorkers"`
	DesiredWorkers int32 `json:"desiredWorkers"`
}

// OutboxMonitorStatus is what the operator observed and concluded.
type OutboxMonitorStatus struct {
	// ObservedGeneration is the spec generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: ClaimLatencySustained, OldestAvailableAgeSustained, ThroughputSustained,
	// WorkersHealthy and the summary BrokerEvaluationRecommended.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Observed holds the figures of the latest evaluation.
	// +optional
	Observed *ObservedSignals `json:"observed,omitempty"`

	// LastScrapeTime is when the pods were last scraped.
	// +optional
	LastScrapeTime *metav1.Time `json:"lastScrapeTime,omitempty"`

	// ScrapeErrors lists the failures of the latest scrape (at most 10), one per pod.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	ScrapeErrors []string `json:"scrapeErrors,omitempty"`
}

// OutboxMonitor watches an outbox-dispatcher's metrics for the external-broker transition
// triggers — by default claim latency p99 above 250ms for 5m, the oldest available effect older
// than 30s for 5m with healthy workers, more than 500 effects per second for 15m — and reports
// them as conditions, Events and a metric. It recommends; it never changes the dispatcher or
// migrates anything. See https://github.com/boardreadyops/cloud/blob/main/docs/operator.md.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=obm,categories=boardreadyops
// +kubebuilder:printcolumn:name="Recommended",type=string,JSONPath=`.status.conditions[?(@.type=="BrokerEvaluationRecommended")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="BrokerEvaluationRecommended")].reason`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.conditions[?(@.type=="WorkersHealthy")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OutboxMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OutboxMonitorSpec   `json:"spec"`
	Status OutboxMonitorStatus `json:"status,omitempty"`
}

// OutboxMonitorList is a list of OutboxMonitors.
//
// +kubebuilder:object:root=true
type OutboxMonitorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OutboxMonitor `json:"items"`
}
