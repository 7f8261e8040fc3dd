package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
)

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "obm-test-"}}
	if err := testClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestCRDDefaultsAreTheSpecifiedThresholds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mon := &v1alpha1.OutboxMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: newNamespace(t)},
		Spec:       v1alpha1.OutboxMonitorSpec{Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: "brops-outbox-dispatcher"}},
	}
	if err := testClient.Create(ctx, mon); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.OutboxMonitor
	if err := testClient.Get(ctx, client.ObjectKeyFromObject(mon), &got); err != nil {
		t.Fatal(err)
	}
	s, tr := got.Spec, got.Spec.Triggers
	checks := []struct {
		name      string
		got, want any
	}{
		{"scrapeInterval", s.ScrapeInterval.Duration, 15 * time.Second},
		{"metricsPort", *s.Dispatcher.MetricsPort, intstr.FromString("metrics")},
		{"metricsPath", s.Dispatcher.MetricsPath, "/metrics"},
		{"claimLatency.threshold", tr.ClaimLatency.Threshold.Duration, 250 * time.Millisecond},
		{"claimLatency.percentile", tr.ClaimLatency.Percentile, int32(99)},
		{"claimLatency.window", tr.ClaimLatency.Window.Duration, 5 * time.Minute},
		{"oldestAvailableAge.threshold", tr.OldestAvailableAge.Threshold.Duration, 30 * time.Second},
		{"oldestAvailableAge.window", tr.OldestAvailableAge.Window.Duration, 5 * time.Minute},
		{"throughput.effectsPerSecond", tr.Throughput.EffectsPerSecond, int32(500)},
		{"throughput.window", tr.Throughput.Window.Duration, 15 * time.Minute},
		{"hysteresisPercent", tr.HysteresisPercent, int32(10)},
		{"clearWindow", tr.ClearWindow.Duration, 5 * time.Minute},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s defaulted to %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestCRDRejectsBadThresholds(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	valid := func() v1alpha1.OutboxMonitorSpec {
		return v1alpha1.OutboxMonitorSpec{Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: "d"}}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.OutboxMonitorSpec)
	}{
		{"no deployment name", func(s *v1alpha1.OutboxMonitorSpec) { s.Dispatcher.DeploymentName = "" }},
		{"zero claim latency threshold", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.ClaimLatency.Threshold = dur(0) }},
		{"negative age threshold", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.OldestAvailableAge.Threshold = dur(-time.Second) }},
		{"percentile 100", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.ClaimLatency.Percentile = 100 }},
		{"throughput below 1", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.Throughput.EffectsPerSecond = -5 }},
		{"window of two days", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.Throughput.Window = dur(48 * time.Hour) }},
		// A zero window would fire on the first interval above the threshold; the controller
		// would take it for unset instead (broker.SettingsFromSpec), so the schema refuses it.
		{"zero claim latency window", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.ClaimLatency.Window = dur(0) }},
		{"zero age window", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.OldestAvailableAge.Window = dur(0) }},
		{"zero throughput window", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.Throughput.Window = dur(0) }},
		{"scrape interval too short", func(s *v1alpha1.OutboxMonitorSpec) { s.ScrapeInterval = dur(10 * time.Millisecond) }},
		{"hysteresis above 90", func(s *v1alpha1.OutboxMonitorSpec) { s.Triggers.HysteresisPercent = 95 }},
		{"metrics path without slash", func(s *v1alpha1.OutboxMonitorSpec) { s.Dispatcher.MetricsPath = "metrics" }},
		{"prometheus URL without scheme", func(s *v1alpha1.OutboxMonitorSpec) {
			s.Prometheus = &v1alpha1.PrometheusSource{URL: "prometheus:9090", Selector: `job="x"`}
		}},
		{"prometheus rate window of 1s", func(s *v1alpha1.OutboxMonitorSpec) {
			s.Prometheus = &v1alpha1.PrometheusSource{URL: "http://prometheus:9090", Selector: `job="x"`, RateWindow: dur(time.Second)}
		}},
		{"tuning without who", func(s *v1alpha1.OutboxMonitorSpec) {
			s.Tuning = &v1alpha1.TuningRecord{CompletedAt: metav1.Now()}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := valid()
			tt.mutate(&spec)
			mon := &v1alpha1.OutboxMonitor{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + string(rune('a'+i)), Namespace: ns}, Spec: spec}
			err := testClient.Create(context.Background(), mon)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create = %v, want an Invalid error from the schema", err)
			}
		})
	}
}
