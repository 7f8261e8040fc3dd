package database_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// A caller that finds the pool's only connection taken waits for it, and the collector says so:
// one acquire of two found no idle connection, and the time it waited is counted.
func TestPoolCollectorCountsWaitsForAConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, pgtest.NewURL(t), database.PoolOptions{MaxConns: 1, ApplicationName: "pool-metrics-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited, started := make(chan error, 1), make(chan struct{})
	go func() {
		close(started)
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		waited <- err
	}()
	<-started
	time.Sleep(50 * time.Millisecond) // the second acquire waits for the held connection
	held.Release()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(database.NewPoolCollector(pool))
	want := `
# HELP boardreadyops_db_pool_acquires_total Connections acquired from the pool.
# TYPE boardreadyops_db_pool_acquires_total counter
boardreadyops_db_pool_acquires_total 2
# HELP boardreadyops_db_pool_connections Connections of this process's database pool, by state.
# TYPE boardreadyops_db_pool_connections gauge
boardreadyops_db_pool_connections{state="acquired"} 0
boardreadyops_db_pool_connections{state="constructing"} 0
boardreadyops_db_pool_connections{state="idle"} 1
# HELP boardreadyops_db_pool_empty_acquires_total Acquires that found no idle connection and waited for one to be released or opened.
# TYPE boardreadyops_db_pool_empty_acquires_total counter
boardreadyops_db_pool_empty_acquires_total 2
# HELP boardreadyops_db_pool_max_connections The pool's cap on connections (BOARDREADYOPS_DB_MAX_CONNS).
# TYPE boardreadyops_db_pool_max_connections gauge
boardreadyops_db_pool_max_connections 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "boardreadyops_db_pool_acquires_total",
		"boardreadyops_db_pool_connections", "boardreadyops_db_pool_empty_acquires_total", "boardreadyops_db_pool_max_connections"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	wait := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "boardreadyops_db_pool_empty_acquire_wait_seconds_total" {
			wait = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if wait <= 0 {
		t.Errorf("empty acquire wait %v s, want the time the second acquire waited", wait)
	}
}
