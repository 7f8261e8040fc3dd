package queuerun

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Desc names and describes one instrument. The name is written out in full where a runner
// declares its metrics, so that searching for a metric finds its declaration.
type Desc struct {
	// Name is the metric's full name ("boardreadyops_lifecycle_jobs"). Required.
	Name string
	// Help is its help text. Required.
	Help string
}

// MetricsConfig names and describes the instruments every queue runner has.
type MetricsConfig struct {
	// States is the gauge of the queue's rows by state (label "state").
	States Desc
	// StateValues is the closed set of the state label, in the order SetStats takes the
	// counts. Required.
	StateValues []string
	// OldestAvailableAge is the gauge of the oldest due row's age in seconds.
	OldestAvailableAge Desc
	// StatsRefreshed is the gauge of the last successful statistics query's time (Unix seconds):
	// the other gauges keep their last values when the query fails, and this one says how old
	// they are.
	StatsRefreshed Desc
	// ClaimDuration is the histogram of claim latency in seconds (ClaimBuckets).
	ClaimDuration Desc
	// Recovered is the counter of expired leases recovered (label "state").
	Recovered Desc
	// RecoveredStates is the closed set of states a recovered row can move to: the counter starts
	// at 0 for each, so that none recovered reads 0, not no data. Optional.
	RecoveredStates []string
}

func (c MetricsConfig) validate() error {
	var errs []error
	for _, d := range []struct {
		field string
		desc  Desc
	}{{"States", c.States}, {"OldestAvailableAge", c.OldestAvailableAge}, {"StatsRefreshed", c.StatsRefreshed}, {"ClaimDuration", c.ClaimDuration}, {"Recovered", c.Recovered}} {
		if strings.TrimSpace(d.desc.Name) == "" || strings.TrimSpace(d.desc.Help) == "" {
			errs = append(errs, fmt.Errorf("queuerun: MetricsConfig.%s needs a name and a help text", d.field))
		}
	}
	if len(c.StateValues) == 0 {
		errs = append(errs, errors.New("queuerun: MetricsConfig.StateValues is required"))
	}
	return errors.Join(errs...)
}

// ClaimBuckets are the claim latency histogram's buckets, in seconds. From 5 ms to 100 ms, around
// the claim latency target (docs/performance.md: p99 10 ms), no bucket is more than 1.5 times the
// one below it, so that a p99 interpolated inside a bucket is off by less than half a bucket: with
// 25 ms next to 50 ms, 26 ms and 34 ms could not be told apart. The alerts' 250 ms is an edge.
var ClaimBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
	0.25, 0.5, 1, 2.5,
}

// Metrics are the instruments every queue runner has. Their labels are closed sets: state only.
type Metrics struct {
	// States counts the queue's rows by state, refreshed by the statistics task (SetStats).
	States *prometheus.GaugeVec
	// OldestAvailableAge is the age of the oldest row that is due and not claimed, in seconds.
	OldestAvailableAge prometheus.Gauge
	// StatsRefreshed is when SetStats last ran (Unix seconds; 0 before the first statistics).
	StatsRefreshed prometheus.Gauge
	// ClaimDuration observes every claim query (ClaimConfig.Duration).
	ClaimDuration prometheus.Histogram
	// Recovered counts expired leases recovered, by the state the row moved to (Recovery).
	Recovered *prometheus.CounterVec

	states []string
}

// NewMetrics registers the shared instruments described by cfg on reg (with promauto.With: a
// name registered twice on reg panics, as promauto does).
func NewMetrics(reg prometheus.Registerer, cfg MetricsConfig) (*Metrics, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := promauto.With(reg)
	m := &Metrics{
		States: f.NewGaugeVec(prometheus.GaugeOpts{Name: cfg.States.Name, Help: cfg.States.Help}, []string{"state"}),
		OldestAvailableAge: f.NewGauge(prometheus.GaugeOpts{
			Name: cfg.OldestAvailableAge.Name, Help: cfg.OldestAvailableAge.Help,
		}),
		StatsRefreshed: f.NewGauge(prometheus.GaugeOpts{Name: cfg.StatsRefreshed.Name, Help: cfg.StatsRefreshed.Help}),
		ClaimDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name: cfg.ClaimDuration.Name, Help: cfg.ClaimDuration.Help, Buckets: ClaimBuckets,
		}),
		Recovered: f.NewCounterVec(prometheus.CounterOpts{Name: cfg.Recovered.Name, Help: cfg.Recovered.Help}, []string{"state"}),
		states:    append([]string(nil), cfg.StateValues...),
	}
	// Every series of the closed sets exists from the start: an idle queue reads 0, not absent.
	for _, state := range cfg.StateValues {
		m.States.WithLabelValues(state)
	}
	for _, state := range cfg.RecoveredStates {
		m.Recovered.WithLabelValues(state)
	}
	return m, nil
}

// SetStats sets the gauges from one statistics query: counts in the order of
// MetricsConfig.StateValues (a missing count is 0, an extra one is an error) and the oldest due row's
// age in seconds. StatsRefreshed becomes the current time.
func (m *Metrics) SetStats(oldestAvailableAgeSeconds float64, counts ...int64) error {
	if len(counts) > len(m.states) {
		return fmt.Errorf("queuerun: %d state counts for %d states", len(counts), len(m.states))
	}
	for i, state := range m.states {
		var n int64
		if i < len(counts) {
			n = counts[i]
		}
		m.States.WithLabelValues(state).Set(float64(n))
	}
	m.OldestAvailableAge.Set(oldestAvailableAgeSeconds)
	m.StatsRefreshed.SetToCurrentTime()
	return nil
}
