package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/opsserver"
	"github.com/boardreadyops/cloud/services/operator/internal/broker"
	"github.com/boardreadyops/cloud/services/operator/internal/controller"
	"github.com/boardreadyops/cloud/services/operator/internal/scrape"
	"github.com/boardreadyops/cloud/services/operator/internal/trigger"
)

type urlList []string

func (u *urlList) String() string     { return strings.Join(*u, ",") }
func (u *urlList) Set(v string) error { *u = append(*u, v); return nil }

// Evaluate is the local mode: it scrapes dispatchers by URL (no cluster), applies the same
// trigger evaluation as the controller, prints one line per round and a conclusion at the end.
// Workers count as healthy in a round when every URL answered.
//
//	operator evaluate --scrape http://127.0.0.1:9092/metrics [--scrape URL…] [--interval 5s] [--rounds 0] [--metrics-addr ADDR]
//
// With --metrics-addr it also serves the operator's own metrics (/metrics, /healthz, /readyz),
// as the controller does, so that Prometheus can scrape the local mode too.
func Evaluate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("operator evaluate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := broker.DefaultSettings()
	var urls urlList
	fs.Var(&urls, "scrape", "a dispatcher metrics URL (repeatable)")
	interval := fs.Duration("interval", 5*time.Second, "time between scrape rounds")
	rounds := fs.Int("rounds", 0, "stop after this many rounds (0: until interrupted)")
	tuned := fs.Bool("tuned", false, "database and index tuning was done (required before a broker is recommended; docs/operator.md)")
	percentile := fs.Int("percentile", 99, "claim latency percentile")
	claim := fs.Duration("claim-latency", 250*time.Millisecond, "claim latency threshold")
	claimWindow := fs.Duration("claim-latency-window", d.Rules[broker.ClaimLatency].Window, "claim latency window")
	age := fs.Duration("oldest-age", 30*time.Second, "oldest available effect age threshold")
	ageWindow := fs.Duration("oldest-age-window", d.Rules[broker.OldestAvailableAge].Window, "oldest age window")
	throughput := fs.Int("throughput", 500, "throughput threshold, effects per second")
	throughputWindow := fs.Duration("throughput-window", d.Rules[broker.Throughput].Window, "throughput window")
	metricsAddr := fs.String("metrics-addr", "", "serve the operator's metrics on this address (empty: not served)")
	clearWindow := fs.Duration("clear-window", d.Rules[broker.Throughput].ClearWindow, "how long a fired trigger's signal must stay below the hysteresis band to clear")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return daemon.ErrUsage
	}
	switch {
	case len(urls) == 0:
		fmt.Fprintln(stderr, "operator evaluate: at least one --scrape URL is required")
		return daemon.ErrUsage
	case *interval < 100*time.Millisecond || *percentile < 50 || *percentile > 99 || *throughput < 1 || *claim <= 0 || *age <= 0:
		fmt.Fprintln(stderr, "operator evaluate: --interval ≥ 100ms, --percentile 50..99, positive thresholds")
		return daemon.ErrUsage
	}
	s := d
	s.Quantile = float64(*percentile) / 100
	s.Rules[broker.ClaimLatency].Threshold, s.Rules[broker.ClaimLatency].Window = claim.Seconds(), *claimWindow
	s.Rules[broker.OldestAvailableAge].Threshold, s.Rules[broker.OldestAvailableAge].Window = age.Seconds(), *ageWindow
	s.Rules[broker.Throughput].Threshold, s.Rules[broker.Throughput].Window = float64(*throughput), *throughputWindow
	for i := range s.Rules {
		s.Rules[i].ClearWindow = *clearWindow
	}

	var metrics *controller.Metrics
	if *metricsAddr != "" {
		reg := prometheus.NewRegistry()
		metrics = controller.NewMetrics(reg)
		srv, err := opsserver.New(*metricsAddr, reg, func(context.Context) error { return nil }, slog.New(slog.NewTextHandler(stderr, nil)))
		if err != nil {
			return err
		}
		serveCtx, cancel := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() { _ = srv.Serve(serveCtx, 5*time.Second); close(served) }()
		defer func() { cancel(); <-served }()
	}
	client := &http.Client{Timeout: *interval}
	eval := broker.NewEvaluator()
	alive := map[string]bool{}
	for _, u := range urls {
		alive[u] = true
	}
	// Fixed widths, not a tabwriter: rows stream out one round at a time.
	const row = "%-8s  %-5s  %-9s  %-10s  %-9s  %-13s  %-20s  %s\n"
	fmt.Fprintf(stdout, row, "time", "pods", fmt.Sprintf("claim p%d", *percentile), "oldest age", "effects/s", "claim_latency", "oldest_available_age", "throughput")
	ticker := time.NewTicker(*interval)
	defer ticker.Stop()
	for n := 0; *rounds == 0 || n < *rounds; n++ {
		if n > 0 {
			select {
			case <-ctx.Done():
				return conclude(stdout, eval, s, *tuned)
			case <-ticker.C:
			}
		}
		now := time.Now()
		samples := map[string]scrape.Sample{}
		for _, u := range urls {
			sctx, cancel := context.WithTimeout(ctx, *interval)
			sample, err := scrape.Fetch(sctx, client, u, now)
			cancel()
			if err != nil {
				fmt.Fprintf(stderr, "operator evaluate: %v\n", err)
				continue
			}
			samples[u] = sample
		}
		res := eval.Evaluate(s, now, samples, alive, len(samples) == len(urls))
		if metrics != nil {
			metrics.ObserveRound(len(samples), len(urls)-len(samples), time.Since(now).Seconds())
			metrics.SetTriggers(eval.Active(), broker.Recommend(eval.Active(), *tuned).Recommended)
		}
		sig := res.Signals
		fmt.Fprintf(stdout, row, now.Format("15:04:05"), fmt.Sprintf("%d/%d", sig.PodsScraped, len(urls)),
			orDash(sig.ClaimLatencyValid, seconds(sig.ClaimLatency)), orDash(sig.OldestAgeValid, seconds(sig.OldestAge)),
			orDash(sig.ThroughputValid, fmt.Sprintf("%.1f", sig.Throughput)),
			stateWord(eval.States[broker.ClaimLatency], res.Transitions[broker.ClaimLatency]),
			stateWord(eval.States[broker.OldestAvailableAge], res.Transitions[broker.OldestAvailableAge]),
			stateWord(eval.States[broker.Throughput], res.Transitions[broker.Throughput]))
	}
	return conclude(stdout, eval, s, *tuned)
}

func conclude(w io.Writer, eval *broker.Evaluator, s broker.Settings, tuned bool) error {
	fmt.Fprintln(w)
	for _, t := range broker.Triggers {
		fmt.Fprintf(w, "%s: %s\n", t.ConditionType(), broker.Describe(t, s, eval.States[t]))
	}
	rec := broker.Recommend(eval.Active(), tuned)
	fmt.Fprintf(w, "%s=%v (%s): %s\n", "BrokerEvaluationRecommended", rec.Recommended, rec.Reason, rec.Message)
	return nil
}

func stateWord(st trigger.State, tr trigger.Transition) string {
	switch {
	case tr == trigger.Fired:
		return "FIRED"
	case tr == trigger.Cleared:
		return "cleared"
	case st.Active:
		return "sustained"
	case !st.AboveSince.IsZero():
		return "pending"
	default:
		return "-"
	}
}

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func seconds(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(100 * time.Microsecond).String()
}
