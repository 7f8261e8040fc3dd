package migrate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestBatchCompletionPlannedPerCall: the jobs' batch completion finds its rows by primary key
// after the table has grown, however small it was when the connection first ran it (migration
// 00038). Before 00038 the connection kept the sequential scan it cached from its sixth call
// while the table was a page.
func TestBatchCompletionPlannedPerCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `ALTER TABLE control_plane_jobs SET (autovacuum_enabled = false);
		ALTER TABLE webhook_inbox SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	deliver := func(from, to int) {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT boardreadyops_webhook_accept('d-' || g, 'push', NULL, 1, 1, '{"event": "push"}',
			sha256(convert_to('d-' || g, 'UTF8')), NULL) FROM generate_series($1::int, $2) g`, from, to); err != nil {
			t.Fatal(err)
		}
	}
	// complete claims n jobs and completes them in one batch, on the same connection.
	complete := func(n int) {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT id FROM boardreadyops_job_claim('w', $1, '1 minute')`, n)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) != n {
			t.Fatalf("claimed %d jobs (%v), want %d", len(ids), err, n)
		}
		if _, err := conn.Exec(ctx, `SELECT boardreadyops_job_complete_batch($1, 'w')`, ids); err != nil {
			t.Fatal(err)
		}
	}
	// Ten batches of eight while the table is a page or two.
	deliver(1, 80)
	for range 10 {
		complete(8)
	}
	deliver(81, 5080)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	before := seqScans(t, tx, "control_plane_jobs")
	for range 5 {
		rows, err := tx.Query(ctx, `SELECT id FROM boardreadyops_job_claim('w', 8, '1 minute')`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT boardreadyops_job_complete_batch($1, 'w')`, ids); err != nil {
			t.Fatal(err)
		}
	}
	if scans := seqScans(t, tx, "control_plane_jobs") - before; scans != 0 {
		t.Errorf("%d sequential scans of control_plane_jobs (5,080 rows) for 5 batch completions, want 0", scans)
	}

	// The outbox's batch transitions are planned per call the same way.
	for _, fn := range []string{"boardreadyops_job_complete_batch", "boardreadyops_outbox_start_delivery_batch",
		"boardreadyops_outbox_complete_check_run_complete_batch"} {
		var config []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(proconfig, '{}') FROM pg_proc WHERE proname = $1`, fn).Scan(&config); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(config, "plan_cache_mode=force_custom_plan") {
			t.Errorf("%s runs with %v, want plan_cache_mode=force_custom_plan", fn, config)
		}
	}
}
