package queuerun_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// Leases whose worker died are taken back: each is logged and counted by its new state, and the
// loops are woken once per recovery that found any.
func TestRecoveryTask(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	store := &jobs.Store{Clock: func() time.Time { return now }}
	ctx := context.Background()
	queuerun.InsertJobs(t, pool, 2, now)
	if got, err := store.Claim(ctx, pool, "died-mid-batch", 10, time.Minute); err != nil || len(got) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(got), err)
	}
	now = now.Add(2 * time.Minute) // the lease has expired

	m := testMetrics(t, prometheus.NewRegistry())
	var logs bytes.Buffer
	wakes := 0
	task := queuerun.Recovery[jobs.Recovered]{
		Name: "recover job leases", Interval: time.Second, Message: "recovered expired job lease",
		Recover: func(ctx context.Context) ([]jobs.Recovered, error) { return store.RecoverLeases(ctx, pool, 1000) },
		Describe: func(r jobs.Recovered) (string, []any) {
			return r.Status, []any{"job_id", r.ID, "previous_owner", r.PreviousOwner}
		},
	}.Task(m, func() { wakes++ }, slog.New(slog.NewTextHandler(&logs, nil)))

	for range 2 { // the second run finds nothing
		if err := task.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.Recovered.WithLabelValues(jobs.StatusAvailable)); got != 2 {
		t.Fatalf("recovered{state=available} = %v, want 2", got)
	}
	if wakes != 1 {
		t.Fatalf("%d wake-ups, want 1", wakes)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="recovered expired job lease"`); n != 2 || !strings.Contains(out, "previous_owner=died-mid-batch status=available") {
		t.Fatalf("logs %q: want a line per recovered lease with its owner and status", out)
	}
	var available int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_jobs WHERE status = 'available' AND lease_owner IS NULL`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if available != 2 {
		t.Fatalf("%d jobs back in the queue, want 2", available)
	}
	if task.Name != "recover job leases" || task.Interval != time.Second {
		t.Fatalf("task %q every %v", task.Name, task.Interval)
	}
}
