package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
	"github.com/boardreadyops/cloud/services/operator/internal/broker"
	"github.com/boardreadyops/cloud/services/operator/internal/promapi"
	"github.com/boardreadyops/cloud/services/operator/internal/scrape"
)

// queryPrometheus reads the three signals from a Prometheus server at now. The interval they hold
// over starts at the previous round (none on the first round: no signal is valid then, as with
// pod scraping). A query that fails or returns nothing leaves its signal invalid — never zero —
// and a failure is reported. One query without series is ordinary (no claim in the rate window
// leaves no latency), but the dispatcher always exports the throughput counter and the age
// gauge, so a round in which every query came back empty means the selector matches none of its
// series: that is reported as a failure too, or the triggers would sit at NoData for good, which
// reads like health. Unless scaledToZero: with the dispatcher Deployment scaled to zero replicas
// no pod exports a series, so an empty round is what a right selector returns (the
// WorkersHealthy condition says ScaledToZero).
func (r *Reconciler) queryPrometheus(ctx context.Context, p *v1alpha1.PrometheusSource, s broker.Settings,
	prevRound, now time.Time, interval time.Duration, scaledToZero bool) (scrape.Signals, []string) {
	window := 2 * time.Minute
	if p.RateWindow != nil && p.RateWindow.Duration > 0 {
		window = p.RateWindow.Duration
	}
	exprs := promapi.Build(p.Selector, s.Quantile, window)
	timeout := r.ScrapeTimeout
	if timeout <= 0 || timeout > interval/2 {
		timeout = interval / 2
	}
	sig := scrape.Signals{Start: prevRound, End: now}
	var errs []string
	empty := 0
	query := func(name, expr string) (float64, bool) {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		v, err := promapi.Query(qctx, r.HTTP, p.URL, expr, now)
		switch {
		case errors.Is(err, promapi.ErrNoData):
			empty++
			return 0, false
		case err != nil:
			r.Metrics.scrapes.WithLabelValues("failure").Inc()
			errs = append(errs, fmt.Sprintf("prometheus %s: %v", name, err))
			return 0, false
		}
		r.Metrics.scrapes.WithLabelValues("success").Inc()
		return v, true
	}
	start := r.now()
	sig.ClaimLatency, sig.ClaimLatencyValid = query("claim latency", exprs.ClaimLatency)
	sig.Throughput, sig.ThroughputValid = query("throughput", exprs.Throughput)
	sig.OldestAge, sig.OldestAgeValid = query("oldest available age", exprs.OldestAge)
	r.Metrics.scrapeSeconds.Observe(r.now().Sub(start).Seconds())
	if empty == 3 && !scaledToZero { // all three
		r.Metrics.scrapes.WithLabelValues("failure").Add(3)
		errs = append(errs, fmt.Sprintf("prometheus: no query returned any series: spec.prometheus.selector {%s} matches none of the dispatcher's series, or Prometheus does not scrape them", p.Selector))
	}
	if prevRound.IsZero() {
		sig.ClaimLatencyValid, sig.ThroughputValid, sig.OldestAgeValid = false, false, false
	}
	return sig, errs
}
