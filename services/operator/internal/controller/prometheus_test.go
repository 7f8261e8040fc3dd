package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
)

// fakePrometheus answers instant queries by the metric they name, with values the test sets;
// a missing value answers an empty vector.
type fakePrometheus struct {
	mu      sync.Mutex
	values  map[string]string
	queries []string
}

func (f *fakePrometheus) set(metric, v string) { f.mu.Lock(); f.values[metric] = v; f.mu.Unlock() }

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	q := r.Form.Get("query")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	for metric, v := range f.values {
		if strings.Contains(q, metric) {
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,%q]}]}}`, v)
			return
		}
	}
	fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
}

func TestReconcilerReadsPrometheus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	d := newFakeDispatcher(t) // only for the Deployment's health; its pods are not scraped
	dispatcherFixture(t, ns, d.port(t))
	prom := &fakePrometheus{values: map[string]string{}}
	srv := httptest.NewServer(prom)
	defer srv.Close()
	mon := &v1alpha1.OutboxMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "dispatcher", Namespace: ns},
		Spec: v1alpha1.OutboxMonitorSpec{
			Dispatcher:     v1alpha1.DispatcherTarget{DeploymentName: "dispatcher"},
			ScrapeInterval: dur(time.Minute),
			Prometheus:     &v1alpha1.PrometheusSource{URL: srv.URL, Selector: `namespace="` + ns + `"`},
			Triggers:       v1alpha1.Triggers{ClaimLatency: v1alpha1.ClaimLatencyTrigger{Window: dur(time.Minute)}},
		},
	}
	must(t, testClient.Create(ctx, mon))
	clk := &clock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	r := &Reconciler{Client: testClient, HTTP: srv.Client(), ScrapeTimeout: 5 * time.Second, Metrics: NewMetrics(prometheus.NewRegistry()), Now: clk.Now}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)}
	round := func() *v1alpha1.OutboxMonitor {
		t.Helper()
		_, err := r.Reconcile(ctx, req)
		must(t, err)
		var got v1alpha1.OutboxMonitor
		must(t, testClient.Get(ctx, req.NamespacedName, &got))
		clk.Advance(time.Minute)
		return &got
	}

	// Claim latency 400 ms (above 250 ms); throughput has no series (invalid, never zero).
	prom.set("boardreadyops_outbox_claim_duration_seconds_bucket", "0.4")
	prom.set("boardreadyops_outbox_oldest_available_effect_age_seconds", "3")
	round() // first round: nothing to hold over an interval yet
	got := round()
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionClaimLatency)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("claim latency condition %+v, want sustained after its 1-minute window", c)
	}
	if o := got.Status.Observed; o == nil || o.ClaimLatencyMilliseconds == nil || *o.ClaimLatencyMilliseconds != 400 || o.EffectsPerSecond != nil {
		t.Fatalf("observed %+v", got.Status.Observed)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionThroughput); c == nil || c.Reason != "NoData" {
		t.Fatalf("throughput condition %+v, want NoData", c)
	}
	prom.mu.Lock()
	q := strings.Join(prom.queries, "\n")
	prom.mu.Unlock()
	if !strings.Contains(q, `namespace="`+ns+`"`) || !strings.Contains(q, "[2m]") {
		t.Fatalf("queries do not carry the selector and the default rate window:\n%s", q)
	}

	// Prometheus down: reported, the fired trigger holds.
	srv.Close()
	got = round()
	if len(got.Status.ScrapeErrors) == 0 || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionClaimLatency) {
		t.Fatalf("with Prometheus down: errors %v, conditions %+v", got.Status.ScrapeErrors, got.Status.Conditions)
	}
}

// TestReconcilerReportsASelectorMatchingNothing: a round in which every query came back empty
// (the selector matches none of the dispatcher's series) is a reported scrape failure, not a
// quiet NoData; a round in which only some are empty (no claims in the rate window) is not, nor
// is an empty round while the dispatcher Deployment is scaled to zero (no pod exports a series).
func TestReconcilerReportsASelectorMatchingNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	d := newFakeDispatcher(t) // only for the Deployment's health
	dispatcherFixture(t, ns, d.port(t))
	// A second dispatcher Deployment, scaled to zero (as the restore runbook leaves it).
	labels := map[string]string{"app.kubernetes.io/component": "stopped-dispatcher"}
	stopped := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "stopped-dispatcher", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dispatcher", Image: "dispatcher"}}},
			},
		},
	}
	must(t, testClient.Create(context.Background(), stopped))
	tests := []struct {
		name       string
		deployment string            // the dispatcher Deployment: "dispatcher" has its replica available
		values     map[string]string // metric → value; the others answer an empty vector
		wantErr    bool
		failures   float64
	}{
		{"every query empty", "dispatcher", map[string]string{}, true, 3},
		{"no claims in the rate window", "dispatcher", map[string]string{
			"boardreadyops_outbox_effects_processed_total":             "0",
			"boardreadyops_outbox_oldest_available_effect_age_seconds": "0",
		}, false, 0},
		{"every query answered", "dispatcher", map[string]string{
			"boardreadyops_outbox_claim_duration_seconds_bucket":       "0.01",
			"boardreadyops_outbox_effects_processed_total":             "10",
			"boardreadyops_outbox_oldest_available_effect_age_seconds": "1",
		}, false, 0},
		{"every query empty, the dispatcher scaled to zero", stopped.Name, map[string]string{}, false, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			prom := &fakePrometheus{values: tt.values}
			srv := httptest.NewServer(prom)
			defer srv.Close()
			mon := &v1alpha1.OutboxMonitor{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Namespace: ns},
				Spec: v1alpha1.OutboxMonitorSpec{
					Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: tt.deployment},
					Prometheus: &v1alpha1.PrometheusSource{URL: srv.URL, Selector: `job="nothing"`},
				},
			}
			must(t, testClient.Create(ctx, mon))
			clk := &clock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
			r := &Reconciler{Client: testClient, HTTP: srv.Client(), ScrapeTimeout: 5 * time.Second, Metrics: NewMetrics(prometheus.NewRegistry()), Now: clk.Now}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)}
			// Two rounds: the first has no interval to hold the signals over, the second does.
			for range 2 {
				_, err := r.Reconcile(ctx, req)
				must(t, err)
				clk.Advance(15 * time.Second)
			}
			var got v1alpha1.OutboxMonitor
			must(t, testClient.Get(ctx, req.NamespacedName, &got))
			reported := false
			for _, e := range got.Status.ScrapeErrors {
				reported = reported || strings.Contains(e, `no query returned any series`) && strings.Contains(e, `job="nothing"`)
			}
			if reported != tt.wantErr {
				t.Errorf("scrape errors %q: selector matching nothing reported = %v, want %v", got.Status.ScrapeErrors, reported, tt.wantErr)
			}
			if f := testutil.ToFloat64(r.Metrics.scrapes.WithLabelValues("failure")); f != 2*tt.failures {
				t.Errorf("failed scrapes = %v, want %v over two rounds", f, 2*tt.failures)
			}
			wantWorkers := "AllReplicasAvailable"
			if tt.deployment == stopped.Name {
				wantWorkers = reasonScaledToZero
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionWorkersHealthy); c == nil || c.Reason != wantWorkers {
				t.Errorf("workers condition %+v, want reason %s", c, wantWorkers)
			}
		})
	}
}
