package migrate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestClaimsPlannedPerCall: a claim reads about the rows it takes, in the claim index's order,
// however few rows its table had when the connection first claimed. A generic plan made while the
// queue held a few rows read every available row (a bitmap scan of the claim index), probed each
// one's installation limits and sorted them, to take eight; in a 20,000-run burst whose dispatcher
// connections had cached it, a claim read 10,000 buffers instead of 465, and the burst ran at
// 252–283 runs/s instead of 333–377. Migration 00040 planned every claim per call. Since 00043
// the outbox's and the jobs' claims keep one generic plan per connection with the plans that made
// it a lottery disabled, 00045 does the same for the paced claim, and 00046 keeps the outbox
// claims from probing a materialized scan of the pacing table. Without those settings, or with
// the claimed rows joined to the CTE instead of found by primary key, 5 claims of 8 read 15,480
// rows; the paced claim, locking its picks without an ORDER BY o.id, read 15,160 (the claim index
// for a primary-key lookup); without 00046, 15,025 rows of the pacing table.
func TestClaimsPlannedPerCall(t *testing.T) {
	t.Parallel()
	const take, claims, backlog = 8, 5, 3000
	// jobs adds n due jobs; from is the first one's number (fillOutbox does the same for effects).
	jobs := func(t *testing.T, conn *pgx.Conn, from, n int) {
		t.Helper()
		if _, err := conn.Exec(context.Background(), `SELECT boardreadyops_webhook_accept('d-' || g, 'push', NULL, 1, 1,
			'{"event": "push"}', sha256(convert_to('d-' || g, 'UTF8')), NULL) FROM generate_series($1::int, $1 + $2 - 1) g`,
			from, n); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, fn, table, claim string
		// fill adds n due rows to the queue whose claim is measured; from is the first row's number.
		fill func(t *testing.T, conn *pgx.Conn, from, n int)
		// perRow bounds the rows a claim may read per row it takes: the pick and the update,
		// and the rows claimed before it that it steps over; the paced claim picks among four
		// times its limit.
		perRow int
		// config is the planner settings the function runs with.
		config []string
	}{
		{"outbox", "boardreadyops_outbox_claim", "control_plane_outbox",
			`SELECT id FROM boardreadyops_outbox_claim('w', $1, '1 minute')`, fillOutbox, 4, outboxClaimPlan},
		{"outbox paced", "boardreadyops_outbox_claim_paced", "control_plane_outbox",
			`SELECT id FROM boardreadyops_outbox_claim_paced('w', $1, '1 minute', 1000, '0')`, fillOutbox, 8,
			slices.Concat(outboxClaimPlan, []string{"max_parallel_workers_per_gather=0"})},
		{"jobs", "boardreadyops_job_claim", "control_plane_jobs",
			`SELECT id FROM boardreadyops_job_claim('w', $1, '1 minute')`, jobs, 4, genericClaimPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, conn := oneRunRepository(t)
			claim := func(q interface {
				Query(context.Context, string, ...any) (pgx.Rows, error)
			}) {
				t.Helper()
				rows, err := q.Query(ctx, tt.claim, take)
				if err != nil {
					t.Fatal(err)
				}
				if ids, err := pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(ids) != take {
					t.Fatalf("claimed %d (%v), want %d", len(ids), err, take)
				}
			}
			// Ten claims while the queue is a few rows and the pacing table a handful, both
			// analyzed: the connection settles its plan.
			tt.fill(t, conn.Conn(), 1, 10*take+take)
			if _, err := conn.Exec(ctx, `INSERT INTO github_installation_limits (installation_id)
				SELECT g FROM generate_series(10001, 10005) g`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `ANALYZE `+tt.table+`, github_installation_limits`); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				claim(conn)
			}
			tt.fill(t, conn.Conn(), 20*take, backlog)
			// Thousands of other installations' pacing rows, which a claim must not read.
			if _, err := conn.Exec(ctx, `INSERT INTO github_installation_limits (installation_id)
				SELECT g FROM generate_series(1000, 3999) g`); err != nil {
				t.Fatal(err)
			}

			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			before, beforeLimits := rowsRead(t, tx, tt.table), rowsRead(t, tx, "github_installation_limits")
			for range claims {
				claim(tx)
			}
			if n, most := rowsRead(t, tx, tt.table)-before, claims*take*tt.perRow; n > most {
				t.Errorf("%d claims of %d from a backlog of %d read %d rows of %s, want at most %d", claims, take, backlog, n, tt.table, most)
			}
			// A claim probes its candidates' installations; the paced one (four times its limit
			// of candidates) also checks, locks and updates the ones it takes from. Reading the
			// table would be thousands.
			if n, most := rowsRead(t, tx, "github_installation_limits")-beforeLimits, claims*10*take; n > most {
				t.Errorf("%d claims read %d rows of github_installation_limits (3,000 other installations' and the claimed ones'), want at most %d", claims, n, most)
			}
			var config []string
			if err := pool.QueryRow(ctx, `SELECT coalesce(proconfig, '{}') FROM pg_proc WHERE proname = $1`, tt.fn).Scan(&config); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.config {
				if !slices.Contains(config, want) {
					t.Errorf("%s runs with %v, want %s", tt.fn, config, want)
				}
			}
		})
	}
}

// genericClaimPlan is what a claim that keeps its generic plan runs with (migrations 00043 and
// 00045): the only plan without a penalty is an ordered scan of the claim index, and the JIT does
// not compile the statements whose unavoidable sorts carry that penalty.
var genericClaimPlan = []string{"plan_cache_mode=force_generic_plan", "enable_seqscan=off", "enable_bitmapscan=off",
	"enable_sort=off", "jit=off"}

// outboxClaimPlan adds what the outbox claims need for their probe of the pacing table (00046):
// no materialized scan of it.
var outboxClaimPlan = slices.Concat(genericClaimPlan, []string{"enable_material=off"})

// fillOutbox adds n due check-run updates of the one release run to the outbox, with attempts
// numbered from from, spread over 500 installations (a claim's installations are then many, as
// the paced claim's pacing rows are).
func fillOutbox(t *testing.T, conn *pgx.Conn, from, n int) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), `
		WITH a AS (
			INSERT INTO execution_attempts (release_run_id, number)
			SELECT (SELECT id FROM release_runs), g FROM generate_series($1::int, $1 + $2 - 1) g RETURNING id, release_run_id, number
		)
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, execution_attempt_id,
			installation_id, available_at)
		SELECT 'github.check_run.complete', 'github.check_run.complete:' || a.release_run_id || ':' || a.id, '{}',
			a.release_run_id, a.id, 1 + a.number % 500, now() - interval '1 minute' FROM a`, from, n); err != nil {
		t.Fatal(err)
	}
}

// oneRunRepository is a database with one installation, one repository and one running release
// run, the queue tables' autovacuum off (so that no ANALYZE replans a statement mid-test), and a
// connection of it that the test releases at its end.
func oneRunRepository(t *testing.T) (*pgxpool.Pool, *pgxpool.Conn) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
		ALTER TABLE control_plane_outbox SET (autovacuum_enabled = false);
		ALTER TABLE control_plane_jobs SET (autovacuum_enabled = false);
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1');
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
		VALUES (1, 1, 'refs/tags/v1.0.0', repeat('a', 40), 'boardreadyops-release.yml', 'running')`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return pool, conn
}
