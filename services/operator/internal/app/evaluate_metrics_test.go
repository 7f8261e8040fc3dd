package app

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
)

// With --metrics-addr the local mode serves the operator's metrics: its scrapes counted by
// result, and the trigger gauges from the local evaluation.
func TestEvaluateServesMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	claims := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "boardreadyops_outbox_claim_duration_seconds", Help: "h", Buckets: []float64{0.001, 0.25, 1}})
	claims.Observe(0.01)
	reg.MustRegister(claims, prometheus.NewCounter(prometheus.CounterOpts{Name: "boardreadyops_outbox_effects_processed_total", Help: "h",
		ConstLabels: prometheus.Labels{"outcome": "completed"}}))
	dispatcher := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer dispatcher.Close()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Evaluate(ctx, []string{"--scrape", dispatcher.URL, "--interval", "100ms", "--metrics-addr", addr}, io.Discard, io.Discard)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := scrapeOperator(t, addr); got[`boardreadyops_operator_scrapes_total{result="success"}`] >= 2 {
			if _, ok := got[`boardreadyops_operator_broker_trigger_active{trigger="throughput"}`]; !ok {
				t.Errorf("no trigger gauge: %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the local mode's metrics never counted two successful scrapes: %v", scrapeOperator(t, addr))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
}

func scrapeOperator(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := probeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil // not listening yet
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return metricstest.ParseText(t, string(body))
}
