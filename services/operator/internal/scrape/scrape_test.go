package scrape

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// dispatcherRegistry mirrors the dispatcher's metric definitions (names, labels, buckets).
type dispatcherRegistry struct {
	reg       *prometheus.Registry
	claims    prometheus.Histogram
	processed *prometheus.CounterVec
	age       prometheus.Gauge
}

func newDispatcherRegistry() *dispatcherRegistry {
	d := &dispatcherRegistry{reg: prometheus.NewRegistry()}
	d.claims = prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricClaimDuration, Help: "h",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}})
	d.processed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricProcessed, Help: "h"}, []string{"effect_type", "outcome"})
	d.age = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricOldestAge, Help: "h"})
	d.reg.MustRegister(d.claims, d.processed, d.age)
	return d
}

func TestFetchParsesDispatcherMetrics(t *testing.T) {
	t.Parallel()
	d := newDispatcherRegistry()
	for range 90 {
		d.claims.Observe(0.002)
	}
	for range 10 {
		d.claims.Observe(0.4)
	}
	d.processed.WithLabelValues("check_run_create", "completed").Add(30)
	d.processed.WithLabelValues("workflow_dispatch", "completed").Add(12)
	d.processed.WithLabelValues("workflow_dispatch", "retried").Add(99)
	d.age.Set(42)
	srv := httptest.NewServer(promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	s, err := Fetch(context.Background(), srv.Client(), srv.URL, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.ClaimCount != 100 || s.Completed != 42 || !s.HasOldestAge || s.OldestAge != 42 {
		t.Fatalf("sample = %+v", s)
	}
	last := s.ClaimBuckets[len(s.ClaimBuckets)-1]
	if !math.IsInf(last.UpperBound, 1) || last.Count != 100 || len(s.ClaimBuckets) != 13 {
		t.Fatalf("buckets = %+v", s.ClaimBuckets)
	}
}

func TestFetchErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"http status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "nope", http.StatusServiceUnavailable) }, "HTTP 503"},
		{"not a dispatcher", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up 1\n")) }, ErrNoDispatcherMetrics.Error()},
		{"garbage", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{{{ not metrics\n")) }, "parse metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			_, err := Fetch(context.Background(), srv.Client(), srv.URL, t0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := Parse(strings.NewReader("up 1\n"), expfmt.NewFormat(expfmt.TypeTextPlain), t0); !errors.Is(err, ErrNoDispatcherMetrics) {
		t.Fatalf("Parse err = %v", err)
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	tests := []struct {
		name    string
		q       float64
		buckets []Bucket
		want    float64
		ok      bool
	}{
		{"empty", 0.99, nil, 0, false},
		{"no observations", 0.99, []Bucket{{0.1, 0}, {inf, 0}}, 0, false},
		{"interpolates in first bucket from zero", 0.5, []Bucket{{0.1, 10}, {inf, 10}}, 0.05, true},
		{"interpolates in a middle bucket", 0.99, []Bucket{{0.1, 90}, {0.5, 100}, {inf, 100}}, 0.1 + 0.4*9/10, true},
		{"rank in +Inf gives the highest finite bound", 0.99, []Bucket{{0.25, 50}, {2.5, 60}, {inf, 100}}, 2.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Quantile(tt.q, tt.buckets)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("Quantile = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// sample builds a pod sample: n claims of which slow took 1 s (the rest 1 ms), completed effects.
func sample(at time.Duration, fast, slow, completed float64) Sample {
	inf := math.Inf(1)
	return Sample{
		Time:         t0.Add(at),
		ClaimBuckets: []Bucket{{0.001, fast}, {0.25, fast}, {1, fast + slow}, {inf, fast + slow}},
		ClaimCount:   fast + slow, Completed: completed, OldestAge: at.Seconds(), HasOldestAge: true,
	}
}

func TestAggregatorUpdate(t *testing.T) {
	t.Parallel()
	alive := map[string]bool{"a": true, "b": true}
	agg := NewAggregator()

	// First round: nothing to diff against, every signal invalid.
	sig := agg.Update(t0, map[string]Sample{"a": sample(0, 100, 0, 1000), "b": sample(0, 100, 0, 1000)}, alive, 0.99)
	if sig.ClaimLatencyValid || sig.ThroughputValid || sig.OldestAgeValid || sig.PodsScraped != 2 {
		t.Fatalf("first round = %+v", sig)
	}

	// Second round, 10 s later: a did 500 effects, b restarted (counter reset) and did 100 since.
	sig = agg.Update(t0.Add(10*time.Second), map[string]Sample{
		"a": sample(10*time.Second, 200, 0, 1500),
		"b": sample(10*time.Second, 0, 100, 100),
	}, alive, 0.99)
	if !sig.ThroughputValid || sig.Throughput != 60 {
		t.Fatalf("throughput = %v (valid %v), want 60/s", sig.Throughput, sig.ThroughputValid)
	}
	// 100 fast claims from a's delta and 100 slow from b's reset: p99 is in the (0.25, 1] bucket.
	if !sig.ClaimLatencyValid || sig.ClaimLatency <= 0.25 || sig.ClaimLatency > 1 {
		t.Fatalf("latency = %v (valid %v)", sig.ClaimLatency, sig.ClaimLatencyValid)
	}
	if !sig.OldestAgeValid || sig.OldestAge != 10 || !sig.Start.Equal(t0) {
		t.Fatalf("signals = %+v", sig)
	}

	// Third round: b failed to scrape; a alone, with no claims, gives throughput but no latency.
	sig = agg.Update(t0.Add(20*time.Second), map[string]Sample{"a": sample(20*time.Second, 200, 0, 1600)}, alive, 0.99)
	if sig.ClaimLatencyValid || sig.Throughput != 10 || sig.PodsScraped != 1 {
		t.Fatalf("third round = %+v", sig)
	}

	// Fourth round: b answers again and is diffed against its last good sample 20 s earlier.
	sig = agg.Update(t0.Add(30*time.Second), map[string]Sample{"b": sample(30*time.Second, 0, 100, 300)}, alive, 0.99)
	if sig.Throughput != 10 || sig.PodsDiffed != 1 {
		t.Fatalf("fourth round = %+v", sig)
	}

	// b is gone: its history is forgotten, so a replacement with the same key starts afresh.
	agg.Update(t0.Add(40*time.Second), map[string]Sample{"a": sample(40*time.Second, 200, 0, 1600)}, map[string]bool{"a": true}, 0.99)
	if _, ok := agg.prev["b"]; ok {
		t.Fatal("a pod that no longer exists kept its history")
	}
}

func TestSumBucketsMixedLayouts(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	got := sumBuckets([]Bucket{{0.1, 5}, {inf, 10}}, []Bucket{{0.1, 1}, {0.5, 2}, {inf, 3}})
	want := []Bucket{{0.1, 6}, {0.5, 7}, {inf, 13}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}
