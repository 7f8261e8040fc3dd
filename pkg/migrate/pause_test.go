package migrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestResumeSeesAPauseItWaitedFor: a resume that waits for runs another operator's pause holds
// tells them from the pauses in force once it has them (migration 00057 locks the runs before it
// reads the pauses): the installation's new pause stands on its check runs, not "resumed".
func TestResumeSeesAPauseItWaitedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1');
		WITH r AS (
			INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, check_run_id)
			SELECT 1, 1, 'refs/tags/v' || g, repeat('a', 40), 'release.yml', 'dispatching', 1000 + g FROM generate_series(1, 3) g
			RETURNING id
		)
		INSERT INTO execution_attempts (release_run_id, number, status) SELECT id, 1, 'dispatching' FROM r;
		INSERT INTO dispatch_pauses (installation_id, operator, reason, paused_at) VALUES (0, 'alice', 'GitHub incident', now())`); err != nil {
		t.Fatal(err)
	}
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
