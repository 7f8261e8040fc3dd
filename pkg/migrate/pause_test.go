package migrate_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestResumeSeesAPauseItWaitedFor: a resume that waits for runs another operator's pause holds
// tells them from the pauses in force once it has them (migration 00057 locks the runs before it
// reads the pauses): the installation's new pause stands on its check runs, not "resumed".
func TestResumeSeesAPauseItWaitedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := waitingRuns(t, 3)
	// Bob pauses installation 1 and holds its runs, as his pause's own telling does.
	bob, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bob.Rollback(ctx) }()
	if _, err := bob.Exec(ctx, `INSERT INTO dispatch_pauses (installation_id, operator, reason, paused_at) VALUES (1, 'bob', 'noisy', now());
		SELECT FROM release_runs WHERE installation_id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// Alice resumes every installation: her telling waits for Bob's runs.
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, `SELECT boardreadyops_outbox_resume_dispatches(NULL, 'alice', 'incident over')`)
		done <- err
	}()
	for waiting := false; !waiting; {
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%resume_dispatches%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := bob.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var resumed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'
		AND payload->>'notice' LIKE 'Workflow dispatches resumed%'`).Scan(&resumed); err != nil {
		t.Fatal(err)
	}
	if resumed != 0 {
		t.Errorf("%d of installation 1's runs told dispatches resumed, want none: its own pause holds them", resumed)
	}
}

// TestPauseToldInSets: a dispatch pause is told on the check runs it holds with set-based calls
// of at most 5,000 runs (migration 00057), never one call per run: 5,001 waiting runs are two
// calls, each run gets its notice, and the count says so.
func TestPauseToldInSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := waitingRuns(t, 5001)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	var told int
	if err := tx.QueryRow(ctx, `SELECT boardreadyops_release_run_tell_pause(0, false)`).Scan(&told); err != nil || told != 5001 {
		t.Fatalf("told %d runs (%v), want 5001", told, err)
	}
	if calls, want := checkRunUpdateCalls(t, tx), map[string]int{"boardreadyops_release_run_enqueue_check_runs": 2}; !maps.Equal(calls, want) {
		t.Errorf("check-run update calls %v, want %v", calls, want)
	}
	var notices int
	if err := tx.QueryRow(ctx, `SELECT count(DISTINCT release_run_id) FROM control_plane_outbox
		WHERE effect_type = 'github.check_run.complete' AND payload->>'state' = 'dispatching'
		  AND payload->>'notice' = 'The release is paused: an operator paused workflow dispatches (GitHub incident). The release workflow starts when they resume.'`).Scan(&notices); err != nil || notices != 5001 {
		t.Errorf("%d runs told of the pause (%v), want 5001", notices, err)
	}
}

// waitingRuns is a database with n release runs of installation 1 waiting for their workflow
// dispatch with a check run, and every installation's dispatches paused by alice.
func waitingRuns(t *testing.T, n int) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1');
		INSERT INTO dispatch_pauses (installation_id, operator, reason, paused_at) VALUES (0, 'alice', 'GitHub incident', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `
		WITH r AS (
			INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, check_run_id)
			SELECT 1, 1, 'refs/tags/v' || g, repeat('a', 40), 'release.yml', 'dispatching', 1000 + g FROM generate_series(1, $1::int) g
			RETURNING id
		)
		INSERT INTO execution_attempts (release_run_id, number, status) SELECT id, 1, 'dispatching' FROM r`, n); err != nil {
		t.Fatal(err)
	}
	return pool
}

// checkRunUpdateCalls is how often this transaction called each check-run update builder
// (SET LOCAL track_functions = 'all' first).
func checkRunUpdateCalls(t *testing.T, tx pgx.Tx) map[string]int {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT funcname, calls FROM pg_stat_xact_user_functions
		WHERE funcname LIKE 'boardreadyops_release_run_enqueue_check_run%'`)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		calls[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}
