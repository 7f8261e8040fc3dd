package retention

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the retention service's instruments. Every series exists from the start (zero),
// so an alert on them never waits for the first deletion.
type Metrics struct {
	Deleted       *prometheus.CounterVec
	OldestExpired *prometheus.GaugeVec
	LastPass      prometheus.Gauge
	Passes        *prometheus.CounterVec
	Leader        prometheus.Gauge
	IndexBytes    *prometheus.GaugeVec
	IndexBloat    *prometheus.GaugeVec
}

// The outcome label of boardreadyops_retention_passes_total.
const (
	PassCompleted = "completed"
	PassFailed    = "failed"
)

// claimIndexes is the closed set of the index label (boardreadyops_retention_index_bloat()).
var claimIndexes = []string{"control_plane_jobs_claim_idx", "control_plane_jobs_lease_idx",
	"control_plane_outbox_claim_idx", "control_plane_outbox_lease_idx"}

// NewMetrics registers the instruments with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		Deleted: f.NewCounterVec(prometheus.CounterOpts{Name: "boardreadyops_retention_deleted_rows_total",
			Help: "Rows deleted by retention, by table (control_plane_jobs also deletes their webhook_inbox rows; release_runs their attempts and effects; webhook_body_digests are replay-defence digests past the replay window)."},
			[]string{"table"}),
		OldestExpired: f.NewGaugeVec(prometheus.GaugeOpts{Name: "boardreadyops_retention_oldest_expired_seconds",
			Help: "Seconds since the oldest row past its retention period crossed it (how far deletion is behind), by table; 0 when none."}, []string{"table"}),
		LastPass: f.NewGauge(prometheus.GaugeOpts{Name: "boardreadyops_retention_last_pass_seconds",
			Help: "Duration in seconds of this replica's last complete retention pass."}),
		Passes: f.NewCounterVec(prometheus.CounterOpts{Name: "boardreadyops_retention_passes_total",
			Help: "Retention passes this replica ran as the leader, by outcome: completed, or failed (a database error or the lease lost part way; the log says which)."},
			[]string{"outcome"}),
		Leader: f.NewGauge(prometheus.GaugeOpts{Name: "boardreadyops_retention_leader",
			Help: "1 while this replica holds the retention lease, else 0."}),
		IndexBytes: f.NewGaugeVec(prometheus.GaugeOpts{Name: "boardreadyops_claim_index_size_bytes",
			Help: "Size in bytes of a partial claim or lease index."}, []string{"index"}),
		IndexBloat: f.NewGaugeVec(prometheus.GaugeOpts{Name: "boardreadyops_claim_index_bloat_ratio",
			Help: "Size of a partial claim or lease index over the size its live entries need (0 until the first VACUUM or ANALYZE)."},
			[]string{"index"}),
	}
	for _, t := range Tables {
		m.Deleted.WithLabelValues(t)
		m.OldestExpired.WithLabelValues(t)
	}
	for _, o := range []string{PassCompleted, PassFailed} {
		m.Passes.WithLabelValues(o)
	}
	for _, i := range claimIndexes {
		m.IndexBytes.WithLabelValues(i)
		m.IndexBloat.WithLabelValues(i)
	}
	return m
}
