package migrate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestReadBackQuietReadsItsIndexes: the sweep for quiet workflow runs
// (boardreadyops_release_run_read_back_quiet, lifecycle, every minute on every replica) finds the
// few long-running runs through release_runs_status_created_idx and probes each one's attempt and
// recent reads by key, however many finished runs and effects the tables hold and whatever plan
// PostgreSQL settles on: custom plans (the first calls), generic plans (forced), and after the
// runs' updates left every page without an all-visible mark. Its NOT EXISTS over the outbox must
// never become an anti join against a sequential scan of the whole outbox (the plan that
// migrations 00061 and 00062 took out of retention's reads of the same shape).
func TestReadBackQuietReadsItsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := pgtest.NewPool(t)
	// 30,000 runs finished since the last vacuum, each with its attempt and three completed
	// effects; among them 4 running for two hours (one read back ten minutes ago, one whose read
	// was dead-lettered an hour ago, one two days ago) and 2 that started a minute ago.
	if _, err := setup.Exec(ctx, `
		ALTER TABLE release_runs SET (autovacuum_enabled = false);
		ALTER TABLE execution_attempts SET (autovacuum_enabled = false);
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1, 'org-1/repo-' || r FROM generate_series(1, 20) r;
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
		SELECT 1 + g % 20, 1, 'refs/tags/v' || g, substr(md5(g::text) || md5(g::text || 'x'), 1, 40),
			'boardreadyops-release.yml', 'running', now() - interval '3 hours' + g * interval '100 ms', now() - interval '2 hours'
		FROM generate_series(1, 30006) g;
		INSERT INTO execution_attempts (release_run_id, number, status, workflow_run_id, dispatched_at, updated_at)
		SELECT id, 1, 'running', 900000 + row_number() OVER (ORDER BY created_at), created_at, now() - interval '2 hours' FROM release_runs;
		UPDATE release_runs SET status = 'succeeded', completed_at = now(), updated_at = now() WHERE ref NOT IN
			('refs/tags/v1', 'refs/tags/v2', 'refs/tags/v3', 'refs/tags/v4', 'refs/tags/v30005', 'refs/tags/v30006');
		UPDATE execution_attempts a SET status = 'succeeded', conclusion = 'success', completed_at = now(), updated_at = now()
		FROM release_runs r WHERE r.id = a.release_run_id AND r.status = 'succeeded';
		UPDATE release_runs SET created_at = now() - interval '1 minute' WHERE ref IN ('refs/tags/v30005', 'refs/tags/v30006');
		UPDATE execution_attempts a SET updated_at = now() - interval '1 minute'
		FROM release_runs r WHERE r.id = a.release_run_id AND r.ref IN ('refs/tags/v30005', 'refs/tags/v30006');
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, release_run_id,
			execution_attempt_id, installation_id)
		SELECT e, e || ':' || a.release_run_id || CASE WHEN e = 'github.check_run.create' THEN '' ELSE ':' || a.id END, '{}',
			'completed', now() - interval '2 hours', a.release_run_id, CASE WHEN e = 'github.check_run.create' THEN NULL ELSE a.id END, 1
		FROM execution_attempts a
		CROSS JOIN unnest(ARRAY['github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete']) e
		WHERE a.status = 'succeeded';
		-- The one read back ten minutes ago.
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, release_run_id,
			execution_attempt_id, installation_id, created_at)
		SELECT 'github.workflow_run.read', 'github.workflow_run.read:' || a.release_run_id || ':' || a.id, '{}', 'completed',
			now() - interval '10 minutes', a.release_run_id, a.id, 1, now() - interval '10 minutes'
		FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id WHERE r.ref = 'refs/tags/v4';
		-- One whose read GitHub refused an hour ago, left alone for a day (00083), and one refused
		-- two days ago, read again.
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, last_error, release_run_id,
			execution_attempt_id, installation_id, created_at, updated_at)
		SELECT 'github.workflow_run.read', 'github.workflow_run.read:' || a.release_run_id || ':' || a.id, '{}', 'dead_letter',
			'rejected (HTTP 404)', a.release_run_id, a.id, 1, now() - d, now() - d
		FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id
		JOIN (VALUES ('refs/tags/v3', interval '1 hour'), ('refs/tags/v2', interval '2 days')) v(ref, d) ON v.ref = r.ref;
		ANALYZE`); err != nil {
		t.Fatal(err)
	}
	// sweep runs the sweep once in a transaction it rolls back, and returns its plan.
	sweep := func(db interface {
		Begin(context.Context) (pgx.Tx, error)
	}, plans *pgtest.Plans, generic bool) (string, []string) {
		t.Helper()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // the sweep's reads are left undone
		var n int
		if err := tx.QueryRow(ctx, `SELECT boardreadyops_release_run_read_back_quiet('30 minutes', 100)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("generic %v: %d runs read back, want 2", generic, n)
		}
		return plans.Find("FROM public.release_runs r")
	}
	for _, generic := range []bool{false, true} {
		var plan string
		var all []string
		if generic {
			plans := pgtest.NewPlans(t, setup.Config().ConnString())
			plan, all = sweep(plans.Conn, plans, generic)
		} else {
			pool, plans := pgtest.NewPlansPool(t, setup.Config().ConnString(), 1)
			plan, all = sweep(pool, plans, generic)
		}
		if plan == "" {
			t.Fatalf("generic %v: no plan of the sweep among %d plans", generic, len(all))
		}
		for _, bad := range []string{"Seq Scan on release_runs", "Seq Scan on execution_attempts", "Seq Scan on control_plane_outbox"} {
			if strings.Contains(plan, bad) {
				t.Errorf("generic %v: the sweep's plan has %q:\n%s", generic, bad, plan)
			}
		}
		if !strings.Contains(plan, "release_runs_status_created_idx") || !strings.Contains(plan, "control_plane_outbox_effect_key") {
			t.Errorf("generic %v: the sweep does not read the status index and the effect key:\n%s", generic, plan)
		}
	}
}
