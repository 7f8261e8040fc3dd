package migrate_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestCheckRunPageProbesWorkflowRuns: a check-run update's attempt list reads each attempt's
// execution_attempt_workflow_runs row by its primary key, also from the plan a connection caches
// before the table was ever analyzed, as on a new installation (migration 00036). Before 00036 that
// plan was a hash join over a sequential scan of the whole table, kept as the table grew.
func TestCheckRunPageProbesWorkflowRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	// At this size a never-analyzed table made the old statement's plan a hash join.
	const runs = 1000
	if _, err := pool.Exec(ctx, `
		ALTER TABLE execution_attempt_workflow_runs SET (autovacuum_enabled = false);
		ALTER TABLE execution_attempts SET (autovacuum_enabled = false);
		ALTER TABLE release_runs SET (autovacuum_enabled = false);
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1');`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT boardreadyops_release_run_create(1, 1, 'refs/tags/v' || g, md5(g::text) || '00000000',
		'boardreadyops-release.yml', 'BoardReadyOps release') FROM generate_series(1, $1) g`, runs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		UPDATE release_runs r SET check_run_id = 1000 + n.n
		FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM release_runs) n WHERE n.id = r.id;
		INSERT INTO execution_attempt_workflow_runs (execution_attempt_id, workflow_run_url, started_at, updated_at)
		SELECT a.id, 'https://github.com/org-1/repo-1/actions/runs/' || a.number, now(), now() FROM execution_attempts a;`); err != nil {
		t.Fatal(err)
	}
	var analyzed bool
	if err := pool.QueryRow(ctx, `SELECT reltuples >= 0 FROM pg_class WHERE oid = 'execution_attempt_workflow_runs'::regclass`).Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	if analyzed {
		t.Fatal("execution_attempt_workflow_runs has statistics; the test needs a table never analyzed")
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// More calls than PL/pgSQL's five custom plans: the later ones run the cached generic plan.
	const calls = 20
	before := seqScans(t, tx, "execution_attempt_workflow_runs")
	rows, err := tx.Query(ctx, `SELECT boardreadyops_release_run_enqueue_check_run(r.id, 'running', NULL, NULL) FROM release_runs r LIMIT $1`, calls)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var updates, listed int
	if scans := seqScans(t, tx, "execution_attempt_workflow_runs") - before; scans != 0 {
		t.Errorf("%d sequential scans of execution_attempt_workflow_runs for %d check-run updates, want 0 (a probe per attempt)", scans, calls)
	}
	// The list is unchanged: each update lists its attempt with the workflow run's URL.
	if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE payload -> 'attempts' -> 0 ->> 'workflow_run_url' LIKE 'https://github.com/org-1/repo-1/actions/runs/%')
		FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`).Scan(&updates, &listed); err != nil {
		t.Fatal(err)
	}
	if updates != calls || listed != calls {
		t.Errorf("%d check-run updates, %d listing their attempt's workflow run; want %d of each", updates, listed, calls)
	}
}

// seqScans reads the backend's count of sequential scans of a table. pg_stat_xact_user_tables
// also holds counts of earlier transactions not yet reported, so a test compares two reads of one
// transaction.
func seqScans(t *testing.T, tx pgx.Tx, table string) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables WHERE relname = $1`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// rowsRead is the rows of table this transaction has read so far, by sequential and index scans
// (pg_stat_xact_user_tables: the transaction's own counts).
func rowsRead(t *testing.T, tx pgx.Tx, table string) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(sum(seq_tup_read + idx_tup_fetch), 0) FROM pg_stat_xact_user_tables
		WHERE relname = $1`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
