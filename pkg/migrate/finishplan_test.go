package migrate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestAttemptFinishReadsOneRun: a workflow run's completion reads its release run by primary key,
// also from the plan a connection caches while release_runs' statistics are stale (migration
// 00037). Before 00037 that plan read every run of the delivery's repository through the
// repository index and kept the one whose id matched: here a thousand runs per completion.
func TestAttemptFinishReadsOneRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	const runs, calls = 1000, 20
	// Statistics taken while each of 100 repositories had two runs, then a thousand more runs in
	// repository 1: the estimate says two runs per repository.
	if _, err := pool.Exec(ctx, `
		ALTER TABLE release_runs SET (autovacuum_enabled = false);
		ALTER TABLE execution_attempts SET (autovacuum_enabled = false);
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) SELECT g, 1, 'org-1/repo-' || g FROM generate_series(1, 100) g;`); err != nil {
		t.Fatal(err)
	}
	create := `SELECT boardreadyops_release_run_create(r, 1, 'refs/tags/v' || g, md5(r || '-' || g) || '00000000',
		'boardreadyops-release.yml', 'BoardReadyOps release') FROM generate_series($1::bigint, $2) r, generate_series(1, $3) g`
	if _, err := pool.Exec(ctx, create, 1, 100, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE release_runs; ANALYZE execution_attempts`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, strings.Replace(create, "'refs/tags/v'", "'refs/tags/v2.'", 1), 1, 1, runs); err != nil {
		t.Fatal(err)
	}
	// Every run of repository 1 dispatched: attempt n is workflow run 100000 + n.
	if _, err := pool.Exec(ctx, `
		UPDATE release_runs r SET check_run_id = 1000 + n.n, status = 'running'
		FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM release_runs WHERE repository_id = 1) n WHERE n.id = r.id;
		UPDATE execution_attempts a SET status = 'running', workflow_run_id = 100000 + n.n, dispatched_at = now()
		FROM (SELECT a.id, row_number() OVER (ORDER BY a.release_run_id) AS n FROM execution_attempts a
		      JOIN release_runs r ON r.id = a.release_run_id WHERE r.repository_id = 1) n WHERE n.id = a.id;`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT boardreadyops_webhook_accept('d-' || g, 'workflow_run', 'completed', 1, 1,
		jsonb_build_object('event', 'workflow_run', 'workflow_run', jsonb_build_object('id', 100000 + g, 'conclusion', 'success',
			'head_sha', (SELECT r.head_sha FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id
			             WHERE a.workflow_run_id = 100000 + g))),
		sha256(convert_to('d-' || g, 'UTF8')), NULL) FROM generate_series(1, $1) g`, calls); err != nil {
		t.Fatal(err)
	}
	var jobs []int64
	rows, err := pool.Query(ctx, `SELECT id FROM boardreadyops_job_claim('lc', $1, '1 minute') ORDER BY id`, calls)
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(jobs) != calls {
		t.Fatalf("claimed %d jobs (%v), want %d", len(jobs), err, calls)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	before := rowsRead(t, tx, "release_runs")
	// More calls than PL/pgSQL's five custom plans: the later ones run the cached generic plan.
	for _, job := range jobs {
		var outcome string
		if err := tx.QueryRow(ctx, `SELECT outcome FROM boardreadyops_execution_attempt_finish($1, 'lc', 'BoardReadyOps release')`,
			job).Scan(&outcome); err != nil || outcome != "completed" {
			t.Fatalf("job %d: outcome %q (%v), want completed", job, outcome, err)
		}
	}
	// The run is read a few times per completion (found, updated, its check-run update enqueued),
	// each by primary key.
	if n := rowsRead(t, tx, "release_runs") - before; n > 10*calls {
		t.Errorf("%d release_runs rows read for %d completions, want at most %d (by primary key)", n, calls, 10*calls)
	}
	var succeeded int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM release_runs WHERE status = 'succeeded'`).Scan(&succeeded); err != nil || succeeded != calls {
		t.Errorf("%d runs succeeded (%v), want %d", succeeded, err, calls)
	}
}
