package queuerun

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// MetricsConfig names and describes the instruments every queue runner has.
type MetricsConfig struct {
	// Subsystem is the second part of every name: boardreadyops_<Subsystem>_... ("lifecycle",
	// "outbox"). Required.
	Subsystem string
	// Rows and Row name the queue's rows in the plural and the singular ("jobs", "job"): the
	// gauge by state is boardreadyops_<Subsystem>_<Rows>, the age gauge
	// boardreadyops_<Subsystem>_oldest_available_<Row>_age_seconds. Required.
	Rows, Row string
	// States is the closed set of the state label, in the order SetStats takes the counts.
	// Required.
	States []string
	// StatesHelp, OldestHelp, ClaimHelp and RecoveredHelp are the help texts of the gauge by
	// state, the age gauge, the claim latency histogram and the recovered counter. Required.
	StatesHelp, OldestHelp, ClaimHelp, RecoveredHelp string
}

func (c MetricsConfig) validate() error {
	var errs []error
	for name, v := range map[string]string{"Subsystem": c.Subsystem, "Rows": c.Rows, "Row": c.Row, "StatesHelp": c.StatesHelp,
		"OldestHelp": c.OldestHelp, "ClaimHelp": c.ClaimHelp, "RecoveredHelp": c.RecoveredHelp} {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Errorf("queuerun: MetricsConfig.%s is required", name))
		}
	}
	if len(c.States) == 0 {
		errs = append(errs, errors.New("queuerun: MetricsConfig.States is required"))
	}
	return errors.Join(errs...)
}

// ClaimBuckets are the claim latency histogram's buckets, in seconds.
var ClaimBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// Metrics are the instruments every queue runner has. Their labels are closed sets: state only.
type Metrics struct {
	// States counts the queue's rows by state, refreshed by the statistics task (SetStats).
	States *prometheus.GaugeVec
	// OldestAvailableAge is the age of the oldest row that is due and not claimed, in seconds.
	OldestAvailableAge prometheus.Gauge
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
	name := func(s string) string { return "boardreadyops_" + cfg.Subsystem + "_" + s }
	return &Metrics{
		States: f.NewGaugeVec(prometheus.GaugeOpts{Name: name(cfg.Rows), Help: cfg.StatesHelp}, []string{"state"}),
		OldestAvailableAge: f.NewGauge(prometheus.GaugeOpts{
			Name: name("oldest_available_" + cfg.Row + "_age_seconds"), Help: cfg.OldestHelp,
		}),
		ClaimDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name: name("claim_duration_seconds"), Help: cfg.ClaimHelp, Buckets: ClaimBuckets,
		}),
		Recovered: f.NewCounterVec(prometheus.CounterOpts{Name: name("leases_recovered_total"), Help: cfg.RecoveredHelp},
			[]string{"state"}),
		states: append([]string(nil), cfg.States...),
	}, nil
}

// SetStats sets the gauges from one statistics query: counts in the order of
// MetricsConfig.States (a missing count is 0, an extra one is an error) and the oldest due row's
// age in seconds.
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
	return nil
}
