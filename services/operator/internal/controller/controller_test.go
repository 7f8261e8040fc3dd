package controller

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
)

// fakeDispatcher serves dispatcher metrics whose figures the test changes.
type fakeDispatcher struct {
	reg       *prometheus.Registry
	claims    prometheus.Histogram
	completed prometheus.Counter
	age       prometheus.Gauge
	failing   atomic.Bool
	srv       *httptest.Server
}

func newFakeDispatcher(t testing.TB) *fakeDispatcher {
	t.Helper()
	d := &fakeDispatcher{reg: prometheus.NewRegistry()}
	d.claims = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "boardreadyops_outbox_claim_duration_seconds", Help: "h",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}})
	processed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boardreadyops_outbox_effects_processed_total", Help: "h"}, []string{"effect_type", "outcome"})
	d.completed = processed.WithLabelValues("check_run_create", "completed")
	d.age = prometheus.NewGauge(prometheus.GaugeOpts{Name: "boardreadyops_outbox_oldest_available_effect_age_seconds", Help: "h"})
	d.reg.MustRegister(d.claims, processed, d.age)
	h := promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{})
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *fakeDispatcher) port(t testing.TB) int32 {
	_, p, err := net.SplitHostPort(d.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// clock is the reconciler's fake clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// dispatcherFixture creates the Deployment and one running pod whose metrics port is the fake
// dispatcher's (envtest has no kubelet: the test writes the pod and deployment status itself).
func dispatcherFixture(t testing.TB, ns string, port int32) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/component": "outbox-dispatcher"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dispatcher", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dispatcher", Image: "dispatcher"}}},
			},
		},
	}
	must(t, testClient.Create(ctx, dep))
	dep.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	must(t, testClient.Status().Update(ctx, dep))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dispatcher-0", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "dispatcher", Image: "dispatcher",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: port}}}}},
	}
	must(t, testClient.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
	must(t, testClient.Status().Update(ctx, pod))
	return dep
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newRecorder(t testing.TB) events.EventRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testCfg)
	must(t, err)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	b.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); b.Shutdown() })
	return b.NewRecorder(testScheme, "boardreadyops-operator")
}

func TestReconcilerReportsTriggersAsFiguresChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	d := newFakeDispatcher(t)
	dep := dispatcherFixture(t, ns, d.port(t))
	mon := &v1alpha1.OutboxMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "dispatcher", Namespace: ns},
		Spec: v1alpha1.OutboxMonitorSpec{
			Dispatcher:     v1alpha1.DispatcherTarget{DeploymentName: "dispatcher"},
			ScrapeInterval: dur(time.Minute),
			Triggers: v1alpha1.Triggers{
				Throughput:  v1alpha1.ThroughputTrigger{EffectsPerSecond: 500, Window: dur(2 * time.Minute)},
				ClearWindow: dur(time.Minute),
			},
		},
	}
	must(t, testClient.Create(ctx, mon))
	clk := &clock{now: time.Date(2026, 12, 2, 11, 59, 0, 0, time.UTC)} // each round advances a minute first
	reg := prometheus.NewRegistry()
	r := &Reconciler{Client: testClient, Recorder: newRecorder(t), HTTP: d.srv.Client(), ScrapeTimeout: 5 * time.Second,
		Metrics: NewMetrics(reg), Now: clk.Now}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)}

	round := func(completedPerSecond float64) *v1alpha1.OutboxMonitor {
		t.Helper()
		clk.Advance(time.Minute)
		d.completed.Add(completedPerSecond * 60)
		for range 100 {
			d.claims.Observe(0.002)
		}
		res, err := r.Reconcile(ctx, req)
		must(t, err)
		if res.RequeueAfter != time.Minute {
			t.Fatalf("RequeueAfter = %v, want the scrape interval", res.RequeueAfter)
		}
		var got v1alpha1.OutboxMonitor
		must(t, testClient.Get(ctx, req.NamespacedName, &got))
		return &got
	}
	cond := func(m *v1alpha1.OutboxMonitor, typ string) metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		if c == nil {
			t.Fatalf("no %s condition in %+v", typ, m.Status.Conditions)
		}
		return *c
	}

	// Round 0: nothing to diff against yet.
	got := round(0)
	if c := cond(got, v1alpha1.ConditionThroughput); c.Status != metav1.ConditionFalse || c.Reason != "NoData" {
		t.Fatalf("round 0 throughput condition %+v", c)
	}
	if c := cond(got, v1alpha1.ConditionWorkersHealthy); c.Status != metav1.ConditionTrue {
		t.Fatalf("workers condition %+v", c)
	}
	if got.Status.Observed == nil || got.Status.Observed.PodsScraped != 1 || got.Status.LastScrapeTime == nil {
		t.Fatalf("observed %+v", got.Status.Observed)
	}

	// A spurious wake-up before the interval passed does not scrape again.
	clk.Advance(time.Second)
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter != 59*time.Second {
		t.Fatalf("early reconcile = %+v, %v", res, err)
	}

	clk.Advance(-time.Second)

	// Rounds 1 and 2 at 1,000 effects/s: pending, then sustained after the 2-minute window.
	if c := cond(round(1000), v1alpha1.ConditionThroughput); c.Reason != "WindowPending" {
		t.Fatalf("round 1 throughput condition %+v", c)
	}
	got = round(1000)
	if c := cond(got, v1alpha1.ConditionThroughput); c.Status != metav1.ConditionTrue || c.Reason != "Sustained" {
		t.Fatalf("round 2 throughput condition %+v", c)
	}
	if got.Status.Observed.EffectsPerSecond == nil || *got.Status.Observed.EffectsPerSecond != 1000 {
		t.Fatalf("observed %+v", got.Status.Observed)
	}
	if c := cond(got, v1alpha1.ConditionBrokerEvaluationRecommended); c.Status != metav1.ConditionFalse || c.Reason != "TuningFirst" {
		t.Fatalf("recommendation without tuning %+v", c)
	}
	if v := testutil.ToFloat64(r.Metrics.triggerActive.WithLabelValues("throughput")); v != 1 {
		t.Fatalf("trigger metric = %v, want 1", v)
	}

	// Recording the tuning (a spec change) turns the recommendation on.
	got.Spec.Tuning = &v1alpha1.TuningRecord{CompletedBy: "dba on call", CompletedAt: metav1.NewTime(clk.Now()), Notes: "claim index, autovacuum"}
	must(t, testClient.Update(ctx, got))
	got = round(1000)
	if c := cond(got, v1alpha1.ConditionBrokerEvaluationRecommended); c.Status != metav1.ConditionTrue || c.Reason != "TriggersSustained" {
		t.Fatalf("recommendation after tuning %+v", c)
	}

	// The endpoint fails: reported, and the fired trigger neither clears nor changes.
	d.failing.Store(true)
	got = round(0)
	if len(got.Status.ScrapeErrors) == 0 || cond(got, v1alpha1.ConditionThroughput).Status != metav1.ConditionTrue {
		t.Fatalf("failing scrape: errors %v, conditions %+v", got.Status.ScrapeErrors, got.Status.Conditions)
	}
	d.failing.Store(false)

	// Load drops to zero: the next good scrape is diffed against the last good one (across the
	// failed round), and the trigger clears once the rate stayed below the hysteresis band for
	// the one-minute clear window.
	got = round(0)
	if c := cond(got, v1alpha1.ConditionThroughput); c.Status != metav1.ConditionFalse {
		t.Fatalf("after the load dropped: %+v", c)
	}
	if c := cond(got, v1alpha1.ConditionBrokerEvaluationRecommended); c.Status != metav1.ConditionFalse || c.Reason != "NoTriggerSustained" {
		t.Fatalf("recommendation after clearing %+v", c)
	}

	// Unhealthy workers are reported.
	dep.Status.AvailableReplicas = 0
	must(t, testClient.Status().Update(ctx, dep))
	got = round(0)
	if c := cond(got, v1alpha1.ConditionWorkersHealthy); c.Status != metav1.ConditionFalse || c.Reason != "ReplicasUnavailable" {
		t.Fatalf("workers condition %+v", c)
	}
	for _, typ := range []string{v1alpha1.ConditionOldestAvailableAge, v1alpha1.ConditionThroughput} {
		if c := cond(got, typ); c.Reason != "WorkersUnhealthy" {
			t.Fatalf("%s condition with unhealthy workers %+v", typ, c)
		}
	}

	// A scale-up under load leaves replicas unavailable too: a rate above the threshold counts
	// (the window is pending, then sustained); the age trigger still counts nothing.
	got = round(1000)
	if c := cond(got, v1alpha1.ConditionThroughput); c.Status != metav1.ConditionFalse || c.Reason != "WindowPending" {
		t.Fatalf("throughput condition with unhealthy workers at 1,000 effects/s %+v", c)
	}
	if c := cond(got, v1alpha1.ConditionOldestAvailableAge); c.Reason != "WorkersUnhealthy" {
		t.Fatalf("age condition with unhealthy workers %+v", c)
	}
	if c := cond(round(1000), v1alpha1.ConditionThroughput); c.Status != metav1.ConditionTrue || c.Reason != "Sustained" {
		t.Fatalf("throughput condition after the 2-minute window with unhealthy workers %+v", c)
	}

	// Every transition was recorded as an Event on the monitor.
	want := map[string]bool{"TriggerSustained": false, "TuningFirst": false, "BrokerEvaluationRecommended": false,
		"TriggerCleared": false, "BrokerEvaluationNotRecommended": false}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var evs eventsv1.EventList
		must(t, testClient.List(ctx, &evs, client.InNamespace(ns)))
		for _, e := range evs.Items {
			if e.Regarding.Name == mon.Name && e.Regarding.Kind == "OutboxMonitor" {
				if _, ok := want[e.Reason]; ok {
					want[e.Reason] = true
				}
			}
		}
		missing := []string{}
		for reason, seen := range want {
			if !seen {
				missing = append(missing, reason)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events never recorded: %v", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestReconcilerRestoresFiredTriggersFromStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	d := newFakeDispatcher(t)
	dispatcherFixture(t, ns, d.port(t))
	mon := &v1alpha1.OutboxMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "dispatcher", Namespace: ns},
		Spec:       v1alpha1.OutboxMonitorSpec{Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: "dispatcher"}},
	}
	must(t, testClient.Create(ctx, mon))
	since := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	mon.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionClaimLatency, Status: metav1.ConditionTrue, Reason: "Sustained", Message: "m", LastTransitionTime: since}}
	must(t, testClient.Status().Update(ctx, mon))

	// A new leader (a fresh reconciler) keeps the fired trigger and its since-time.
	r := &Reconciler{Client: testClient, HTTP: d.srv.Client(), Metrics: NewMetrics(prometheus.NewRegistry())}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)})
	must(t, err)
	var got v1alpha1.OutboxMonitor
	must(t, testClient.Get(ctx, client.ObjectKeyFromObject(mon), &got))
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionClaimLatency)
	if c == nil || c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&since) {
		t.Fatalf("claim latency condition after restart %+v", c)
	}
}

// TestReconcilerForgetsARecreatedMonitor: a monitor deleted and created again under its name
// (Helm's before-hook-creation on every upgrade), with no reconcile in between that saw it
// missing, starts again: the new object's triggers are not the old one's.
func TestReconcilerForgetsARecreatedMonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	d := newFakeDispatcher(t) // only for the Deployment's health
	dispatcherFixture(t, ns, d.port(t))
	prom := &fakePrometheus{values: map[string]string{
		"boardreadyops_outbox_claim_duration_seconds_bucket": "0.4", // above 250 ms
	}}
	srv := httptest.NewServer(prom)
	defer srv.Close()
	newMonitor := func() *v1alpha1.OutboxMonitor {
		return &v1alpha1.OutboxMonitor{
			ObjectMeta: metav1.ObjectMeta{Name: "dispatcher", Namespace: ns},
			Spec: v1alpha1.OutboxMonitorSpec{
				Dispatcher:     v1alpha1.DispatcherTarget{DeploymentName: "dispatcher"},
				ScrapeInterval: dur(time.Minute),
				Prometheus:     &v1alpha1.PrometheusSource{URL: srv.URL, Selector: `namespace="` + ns + `"`},
				Triggers:       v1alpha1.Triggers{ClaimLatency: v1alpha1.ClaimLatencyTrigger{Window: dur(time.Minute)}},
			},
		}
	}
	mon := newMonitor()
	must(t, testClient.Create(ctx, mon))
	clk := &clock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	r := &Reconciler{Client: testClient, HTTP: srv.Client(), ScrapeTimeout: 5 * time.Second, Metrics: NewMetrics(prometheus.NewRegistry()), Now: clk.Now}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)}
	round := func() metav1.Condition {
		t.Helper()
		_, err := r.Reconcile(ctx, req)
		must(t, err)
		clk.Advance(time.Minute)
		var got v1alpha1.OutboxMonitor
		must(t, testClient.Get(ctx, req.NamespacedName, &got))
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionClaimLatency)
		if c == nil {
			t.Fatalf("no claim latency condition in %+v", got.Status.Conditions)
		}
		return *c
	}
	round()
	if c := round(); c.Reason != "Sustained" {
		t.Fatalf("claim latency condition %+v, want sustained after its 1-minute window", c)
	}

	must(t, testClient.Delete(ctx, mon))
	must(t, testClient.Create(ctx, newMonitor()))
	if c := round(); c.Status == metav1.ConditionTrue || c.Reason == "Sustained" {
		t.Fatalf("re-created monitor's claim latency condition %+v, want its history to start again", c)
	}
	if v := testutil.ToFloat64(r.Metrics.triggerActive.WithLabelValues("claim_latency")); v != 0 {
		t.Fatalf("claim latency trigger metric = %v after the monitor was re-created, want 0", v)
	}
}

func TestReconcilerMissingDeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mon := &v1alpha1.OutboxMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "nothing", Namespace: newNamespace(t)},
		Spec:       v1alpha1.OutboxMonitorSpec{Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: "absent"}},
	}
	must(t, testClient.Create(ctx, mon))
	r := &Reconciler{Client: testClient, HTTP: http.DefaultClient, Metrics: NewMetrics(prometheus.NewRegistry())}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)})
	must(t, err)
	var got v1alpha1.OutboxMonitor
	must(t, testClient.Get(ctx, client.ObjectKeyFromObject(mon), &got))
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionWorkersHealthy)
	if c == nil || c.Reason != "DeploymentNotFound" || len(got.Status.ScrapeErrors) == 0 {
		t.Fatalf("status %+v", got.Status)
	}
	// Deleting the monitor forgets it.
	must(t, testClient.Delete(ctx, mon))
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)}); err != nil {
		t.Fatal(err)
	}
	if len(r.monitors) != 0 {
		t.Fatalf("monitor state kept after deletion")
	}
}
