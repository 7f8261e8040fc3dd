package telemetry_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// TestExemplarsAtMostOncePerBucketPerInterval: within ExemplarInterval a bucket keeps the exemplar
// it took, other buckets take their own, and after the interval the bucket takes the next one.
// Not parallel: it moves the gates' clock.
func TestExemplarsAtMostOncePerBucketPerInterval(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	defer telemetry.SetClock(func() time.Time { return at })()
	traceOf := func(n int) context.Context {
		return telemetry.ContextWithTraceparent(context.Background(), fmt.Sprintf("00-%032x-0123456789abcdef-01", n))
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "h", Buckets: []float64{0.1, 1}}, []string{"kind"})
	steps := []struct {
		advance time.Duration
		value   float64
		trace   int
		want    [3]int // the trace in each bucket's exemplar (0.1, 1, +Inf), 0 for none
	}{
		{0, 0.05, 1, [3]int{1, 0, 0}},
		{time.Millisecond, 0.07, 2, [3]int{1, 0, 0}},                                // same bucket, inside the interval: kept
		{time.Millisecond, 0.5, 3, [3]int{1, 3, 0}},                                 // another bucket takes its own
		{time.Millisecond, 1, 4, [3]int{1, 3, 0}},                                   // a bound belongs to its bucket
		{time.Millisecond, 7, 5, [3]int{1, 3, 5}},                                   // +Inf too
		{telemetry.ExemplarInterval - 4*time.Millisecond, 0.09, 6, [3]int{6, 3, 5}}, // bucket 0.1's interval is over
		{0, 0.6, 7, [3]int{6, 3, 5}},                                                // bucket 1's began 2 ms after bucket 0.1's
		{2 * time.Millisecond, 0.6, 8, [3]int{6, 8, 5}},
	}
	for i, s := range steps {
		at = at.Add(s.advance)
		telemetry.Observe(traceOf(s.trace), h.WithLabelValues("a"), s.value)
		var m dto.Metric
		if err := h.WithLabelValues("a").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetHistogram().GetSampleCount(); got != uint64(i+1) {
			t.Fatalf("step %d: %d observations, want %d", i, got, i+1)
		}
		var got [3]int
		for j, b := range m.GetHistogram().GetBucket() {
			if ex := b.GetExemplar(); ex != nil {
				_, _ = fmt.Sscanf(ex.GetLabel()[0].GetValue(), "%x", &got[j])
			}
		}
		// The +Inf bucket is written (third) only when it holds an exemplar.
		if got != s.want {
			t.Fatalf("step %d: exemplars %v, want %v", i, got, s.want)
		}
	}
	// Another series of the vector, and a histogram of its own, have gates of their own.
	telemetry.Observe(traceOf(9), h.WithLabelValues("b"), 0.05)
	other := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "o_seconds", Help: "o", Buckets: []float64{0.1}})
	telemetry.ObserveTraceID(other, 0.05, fmt.Sprintf("%032x", 10))
	for _, o := range []prometheus.Observer{h.WithLabelValues("b"), other} {
		var m dto.Metric
		if err := o.(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		if m.GetHistogram().GetBucket()[0].GetExemplar() == nil {
			t.Fatalf("%v: no exemplar", o)
		}
	}
	// An observer whose buckets cannot be read still observes, with its exemplar.
	var seen float64
	telemetry.Observe(traceOf(11), prometheus.ObserverFunc(func(v float64) { seen = v }), 3)
	if seen != 3 {
		t.Fatalf("ObserverFunc saw %v", seen)
	}
}

// TestExemplarsOnHistogramsWithoutClassicBuckets: a native-only histogram has no bucket bounds to
// gate by; it is remembered as such and every traced observation keeps its exemplar.
func TestExemplarsOnHistogramsWithoutClassicBuckets(t *testing.T) {
	t.Parallel()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "n_seconds", Help: "n", NativeHistogramBucketFactor: 1.1,
		NativeHistogramMaxExemplars: 10})
	for i := 1; i <= 3; i++ {
		telemetry.ObserveTraceID(h, float64(i), fmt.Sprintf("%032x", i))
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	finite := 0 // client_golang writes a +Inf bucket for the last exemplar; no other
	for _, b := range m.GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), +1) {
			finite++
		}
	}
	if got := m.GetHistogram(); got.GetSampleCount() != 3 || finite != 0 || len(got.GetExemplars()) != 3 {
		t.Fatalf("%d observations, %d classic buckets, %d exemplars; want 3, 0, 3", got.GetSampleCount(), finite, len(got.GetExemplars()))
	}
}
