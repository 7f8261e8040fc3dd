package database

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports a pool's own statistics at each scrape: how many connections it holds
// and in what state, and how often and how long callers waited for one because none was idle.
// Those waits are in every latency the service reports (a claim's, a commit's) and in none of
// PostgreSQL's views: a pool too small for its work shows here first.
type PoolCollector struct {
	pool                                        *pgxpool.Pool
	conns, max, acquires, empty, wait, canceled *prometheus.Desc
}

// NewPoolCollector returns the collector of pool's statistics.
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	return &PoolCollector{
		pool: pool,
		conns: prometheus.NewDesc("boardreadyops_db_pool_connections",
			"Connections of this process's database pool, by state.", []string{"state"}, nil),
		max: prometheus.NewDesc("boardreadyops_db_pool_max_connections",
			"The pool's cap on connections (BOARDREADYOPS_DB_MAX_CONNS).", nil, nil),
		acquires: prometheus.NewDesc("boardreadyops_db_pool_acquires_total",
			"Connections acquired from the pool.", nil, nil),
		empty: prometheus.NewDesc("boardreadyops_db_pool_empty_acquires_total",
			"Acquires that found no idle connection and waited for one to be released or opened.", nil, nil),
		wait: prometheus.NewDesc("boardreadyops_db_pool_empty_acquire_wait_seconds_total",
			"Time callers waited for a connection because none was idle.", nil, nil),
		canceled: prometheus.NewDesc("boardreadyops_db_pool_canceled_acquires_total",
			"Acquires given up because the caller's context ended first.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.max, c.acquires, c.empty, c.wait, c.canceled} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(c.canceled, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
}
