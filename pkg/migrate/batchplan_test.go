package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestBatchCompletionPlannedPerCall: the jobs' batch completion finds its rows by primary key
// after the table has grown, however small it was when the connection first ran it. Before
// migration 00038 the connection kept the sequential scan it cached from its sixth call while the
// table was a page; 00038 planned it per call; since 00043 it keeps one generic plan with
// sequential and bitmap scans disabled (without them: 10 sequential scans here).
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
	before, beforeRows := seqScans(t, tx, "control_plane_jobs"), rowsRead(t, tx, "control_plane_jobs")
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
	// Nor an index that reads more than the batch: each claim reads about its rows, each
	// completion its eight by primary key.
	if n, most := rowsRead(t, tx, "control_plane_jobs")-beforeRows, 5*8*(4+2); n > most {
		t.Errorf("5 claims and batch completions of 8 read %d rows of control_plane_jobs, want at most %d", n, most)
	}

	for _, fn := range batchTransitions {
		var config []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(proconfig, '{}') FROM pg_proc WHERE proname = $1`, fn).Scan(&config); err != nil {
			t.Fatal(err)
		}
		for _, want := range genericBatchPlan {
			if !slices.Contains(config, want) {
				t.Errorf("%s runs with %v, want %s", fn, config, want)
			}
		}
	}
}

// The batch transitions and the settings they run with (migrations 00043 and 00047): one generic
// plan per connection that may only probe the primary key. The check-run completion tests its
// effect type with IS NOT DISTINCT FROM, which no index serves: as `=` it matched
// control_plane_outbox_effect_key, and its generic plan, made on an empty outbox, read 25,560 rows
// in TestOutboxBatchTransitionsPlannedOnce.
var (
	genericBatchPlan = []string{"plan_cache_mode=force_generic_plan", "enable_seqscan=off", "enable_bitmapscan=off", "jit=off"}
	batchTransitions = []string{"boardreadyops_job_complete_batch", "boardreadyops_outbox_start_delivery_batch",
		"boardreadyops_outbox_complete_check_run_complete_batch", "boardreadyops_outbox_complete_check_run_create_batch",
		"boardreadyops_outbox_complete_workflow_dispatch_batch", "boardreadyops_execution_attempt_finish_batch",
		"boardreadyops_release_run_enqueue_check_runs", "boardreadyops_release_run_create_from_push_batch"}
)

// TestOutboxBatchTransitionsPlannedOnce: the outbox's batch delivery start and check-run
// completion find their rows by primary key after the outbox has grown, however small it was when
// the connection first ran them (migrations 00043 and 00047: both keep one generic plan).
func TestOutboxBatchTransitionsPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn := oneRunRepository(t)
	// deliver claims eight check-run updates, then starts and completes them in batches.
	deliver := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}) {
		t.Helper()
		rows, err := q.Query(ctx, `SELECT id FROM boardreadyops_outbox_claim('w', 8, '1 minute')`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) != 8 {
			t.Fatalf("claimed %d effects (%v), want 8", len(ids), err)
		}
		for _, fn := range []string{"boardreadyops_outbox_start_delivery_batch", "boardreadyops_outbox_complete_check_run_complete_batch"} {
			if tag, err := q.Exec(ctx, `SELECT FROM `+fn+`($1, 'w')`, ids); err != nil || tag.RowsAffected() != 8 {
				t.Fatalf("%s: %d rows (%v), want 8", fn, tag.RowsAffected(), err)
			}
		}
	}
	// The connection's first calls meet an empty outbox (a new installation), then ten batches
	// while it is a page or two.
	for _, fn := range []string{"boardreadyops_outbox_start_delivery_batch", "boardreadyops_outbox_complete_check_run_complete_batch"} {
		if _, err := conn.Exec(ctx, `SELECT FROM `+fn+`('{}', 'w')`); err != nil {
			t.Fatal(err)
		}
	}
	fillOutbox(t, conn.Conn(), 1, 88)
	for range 10 {
		deliver(conn)
	}
	fillOutbox(t, conn.Conn(), 100, 5000)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Five batches of eight: each claim reads about its rows (TestClaimsPlannedPerCall), each
	// batch transition its eight by primary key.
	before := rowsRead(t, tx, "control_plane_outbox")
	for range 5 {
		deliver(tx)
	}
	if n, most := rowsRead(t, tx, "control_plane_outbox")-before, 5*8*(4+2); n > most {
		t.Errorf("5 batches of 8 read %d rows of control_plane_outbox (5,088 rows), want at most %d", n, most)
	}
}

// TestRunBatchesPlannedOnce: the batches that advance release runs — check-run creations
// (migration 00050), workflow-dispatch completions (00051) and finished workflow runs (00052) —
// read only their own effects, jobs, deliveries, runs, attempts and repositories, by their keys,
// after the tables have grown (5,088 runs of one repository), however small they were when the
// connection first ran them, and however many effects other workers hold. They run with the other batch transitions'
// settings (one generic plan that may only probe indexes: TestBatchCompletionPlannedPerCall).
func TestRunBatchesPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
		ALTER TABLE control_plane_outbox SET (autovacuum_enabled = false);
		ALTER TABLE release_runs SET (autovacuum_enabled = false);
		ALTER TABLE execution_attempts SET (autovacuum_enabled = false);
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1')`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// pending adds release runs v<from>..v<from+n-1> as lifecycle creates them: check_pending,
	// attempt 1 pending, the check-run creation enqueued.
	pending := func(from, n int) {
		t.Helper()
		if _, err := conn.Exec(ctx, `
			WITH r AS (
				INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
				SELECT 1, 1, 'refs/tags/v' || g, repeat('a', 40), 'boardreadyops-release.yml', 'check_pending'
				FROM generate_series($1::int, $1 + $2 - 1) g RETURNING id
			), a AS (
				INSERT INTO execution_attempts (release_run_id, number) SELECT id, 1 FROM r
			)
			INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, installation_id)
			SELECT 'github.check_run.create', 'github.check_run.create:' || id, '{}', id, 1 FROM r`, from, n); err != nil {
			t.Fatal(err)
		}
	}
	type querier interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}
	tables := []string{"control_plane_outbox", "release_runs", "execution_attempts", "execution_attempt_workflow_runs", "repositories",
		"webhook_inbox", "control_plane_jobs"}
	batches := []struct {
		function, effectType string
		args                 func(ids []int64) []any
	}{
		{"boardreadyops_outbox_complete_check_run_create_batch", "github.check_run.create", func(ids []int64) []any {
			checkRuns := make([]int64, len(ids))
			for i, id := range ids {
				checkRuns[i] = 1000 + id
			}
			return []any{ids, checkRuns}
		}},
		{"boardreadyops_outbox_complete_workflow_dispatch_batch", "github.workflow.dispatch", func(ids []int64) []any {
			workflowRuns, pages := make([]int64, len(ids)), make([]string, len(ids))
			for i, id := range ids {
				workflowRuns[i], pages[i] = 5000+id, fmt.Sprintf("https://github.com/org-1/repo-1/actions/runs/%d", 5000+id)
			}
			return []any{ids, workflowRuns, pages}
		}},
		// The lifecycle's: "github.workflow.dispatch" names no effect here; the jobs are leased below.
		{"boardreadyops_execution_attempt_finish_batch", "", func(ids []int64) []any {
			return []any{ids, "BoardReadyOps release", make([]*string, len(ids))}
		}},
	}
	read := map[string]map[string]int{}
	// advance leases eight effects of each batch's type in turn (the creations, then the
	// dispatches they enqueued, started) and runs the batch on them; in a transaction it adds the
	// rows each batch read to read.
	advance := func(q querier) {
		t.Helper()
		tx, _ := q.(pgx.Tx)
		for _, batch := range batches {
			lease := `UPDATE control_plane_outbox SET status = 'leased', lease_owner = 'w', lease_expires_at = now() + interval '1 minute',
					delivery_started_at = now()
				WHERE id IN (SELECT id FROM control_plane_outbox WHERE status = 'available' AND effect_type = $1 ORDER BY id LIMIT 8)
				RETURNING id`
			if batch.effectType == "" {
				// A completed workflow_run delivery and its job, leased to w, for each of the eight
				// runs the dispatch batch just started.
				lease = `WITH i AS (
						INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload, payload_sha256)
						SELECT 'd-' || a.workflow_run_id, 'workflow_run', 'completed', 1, 1,
						       jsonb_build_object('workflow_run', jsonb_build_object('id', a.workflow_run_id, 'run_attempt', 1, 'conclusion', 'success',
						           'event', 'workflow_dispatch',
						           'head_sha', (SELECT r.head_sha FROM release_runs r WHERE r.id = a.release_run_id))),
						       sha256(convert_to('d-' || a.workflow_run_id, 'UTF8'))
						FROM execution_attempts a WHERE a.status = 'running' AND $1 = ''
						RETURNING id
					)
					INSERT INTO control_plane_jobs (kind, inbox_id, status, attempts, lease_owner, lease_expires_at)
					SELECT 'workflow_run', i.id, 'leased', 1, 'w', now() + interval '1 minute' FROM i
					RETURNING id`
			}
			rows, err := q.Query(ctx, lease, batch.effectType)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(ids) != 8 {
				t.Fatalf("leased %d effects of %s (%v), want 8", len(ids), batch.effectType, err)
			}
			before := map[string]int{}
			for _, table := range tables {
				if tx != nil {
					before[table] = rowsRead(t, tx, table)
				}
			}
			args := batch.args(ids)
			params := []string{}
			for i := range args {
				params = append(params, fmt.Sprintf("$%d", i+1))
			}
			call := `SELECT FROM ` + batch.function + `(` + strings.Join(params, ", ") + `, 'w')`
			if batch.effectType == "" { // (job ids, worker, check run name, traceparents)
				call = `SELECT FROM ` + batch.function + `($1, 'w', $2, $3)`
			}
			rows, err = q.Query(ctx, call, args...)
			if err != nil {
				t.Fatal(err)
			}
			done, err := pgx.CollectRows(rows, func(pgx.CollectableRow) (struct{}, error) { return struct{}{}, nil })
			if err != nil || len(done) != 8 {
				t.Fatalf("%s: %d effects completed (%v), want 8", batch.function, len(done), err)
			}
			if tx != nil {
				if read[batch.function] == nil {
					read[batch.function] = map[string]int{}
				}
				for _, table := range tables {
					read[batch.function][table] += rowsRead(t, tx, table) - before[table]
				}
			}
		}
	}
	// The connection's first calls meet empty tables, then ten rounds while they are a page or two.
	if _, err := conn.Exec(ctx, `SELECT FROM boardreadyops_outbox_complete_check_run_create_batch('{}', '{}', 'w');
		SELECT FROM boardreadyops_outbox_complete_workflow_dispatch_batch('{}', '{}', '{}', 'w');
		SELECT FROM boardreadyops_execution_attempt_finish_batch('{}', 'w', 'BoardReadyOps release', '{}')`); err != nil {
		t.Fatal(err)
	}
	pending(1, 88)
	for range 10 {
		advance(conn)
	}
	pending(100, 5000)
	// Another dispatcher holds 4,000 of them: a plan that reads the leased effects (the lease
	// index) instead of the call's own would read those too.
	if _, err := conn.Exec(ctx, `UPDATE control_plane_outbox SET status = 'leased', lease_owner = 'other', lease_expires_at = now() + interval '1 hour'
		WHERE id IN (SELECT id FROM control_plane_outbox WHERE status = 'available' ORDER BY id DESC LIMIT 4000)`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		advance(tx)
	}
	// Each batch enqueues its eight check-run updates with one call (migration 00055), not one
	// call per run: 10 calls for the dispatch and finish batches' 80 runs.
	if calls, want := checkRunUpdateCalls(t, tx), map[string]int{"boardreadyops_release_run_enqueue_check_runs": 10}; !maps.Equal(calls, want) {
		t.Errorf("check-run update calls %v, want %v", calls, want)
	}
	for _, batch := range batches {
		for _, table := range tables {
			n := read[batch.function][table]
			t.Logf("%s: %d rows of %s", batch.function, n, table)
			// Each run's rows a few times: its lock, its update, the foreign-key checks; the
			// check-run update reads the run's attempt again (itself, the count, the list).
			if most := 5 * 8 * 10; n > most {
				t.Errorf("%s: 5 batches of 8 read %d rows of %s (5,088 runs), want at most %d", batch.function, n, table, most)
			}
		}
	}
}

// TestRunBatchesRefuseDuplicateIDs: a set-based run transition names each effect or job once;
// an id twice is refused as an invalid argument rather than carried out once or failing on a
// constraint.
func TestRunBatchesRefuseDuplicateIDs(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	for _, call := range []string{
		`SELECT * FROM boardreadyops_outbox_complete_check_run_create_batch('{1,1}', '{5,6}', 'w')`,
		`SELECT * FROM boardreadyops_outbox_complete_workflow_dispatch_batch('{1,1}', '{5,6}', '{NULL,NULL}', 'w')`,
		`SELECT * FROM boardreadyops_execution_attempt_finish_batch('{1,1}', 'w', 'BoardReadyOps release', '{NULL,NULL}')`,
		`SELECT * FROM boardreadyops_release_run_enqueue_check_runs('{00000000-0000-0000-0000-000000000001,00000000-0000-0000-0000-000000000001}',
			'{running,running}', '{NULL,NULL}', '{NULL,NULL}')`,
		`SELECT * FROM boardreadyops_release_run_create_from_push_batch('{1,1}', 'w', 'release.yml', 'BoardReadyOps release', '{NULL,NULL}')`,
	} {
		_, err := pool.Exec(context.Background(), call)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
			t.Errorf("%s: %v, want SQLSTATE 22023", call, err)
		}
	}
}

// TestPushBatchRefusesJobsItMayNotCreate: the set-based run creation (migration 00056) writes
// nothing unless every job is a push delivery of a repository leased by the caller; lifecycle
// then handles each job alone, for its exact error.
func TestPushBatchRefusesJobsItMayNotCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	// A push that would create its run: its repository is recorded, its commit well formed.
	if _, err := pool.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1')`); err != nil {
		t.Fatal(err)
	}
	var push, other int64
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT job_id FROM boardreadyops_webhook_accept('d-1', 'push', NULL, 1, 1,
			jsonb_build_object('push', jsonb_build_object('ref', 'refs/tags/v1', 'after', repeat('a', 40))), sha256('d-1'), NULL)),
		(SELECT job_id FROM boardreadyops_webhook_accept('d-2', 'ping', NULL, 1, 1, '{}', sha256('d-2'), NULL))`).Scan(&push, &other); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT FROM boardreadyops_job_claim('w', 10, '1 minute')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		jobs   []int64
		worker string
	}{
		{"another worker's push", []int64{push}, "w2"},
		{"a push and a ping", []int64{push, other}, "w"},
		{"a job that does not exist", []int64{push, 999999}, "w"},
	} {
		_, err := pool.Exec(ctx, `SELECT * FROM boardreadyops_release_run_create_from_push_batch($1, $2, 'release.yml', 'BoardReadyOps release',
			array_fill(NULL::text, ARRAY[cardinality($1::bigint[])]))`, c.jobs, c.worker)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "BR005" {
			t.Errorf("%s: %v, want SQLSTATE BR005", c.name, err)
		}
	}
	var runs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM release_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d release runs (%v), want none", runs, err)
	}
	// The push alone, by its worker, creates its run: the refusals above were the other jobs'.
	var created *string
	if err := pool.QueryRow(ctx, `SELECT release_run_id::text FROM boardreadyops_release_run_create_from_push_batch($1, 'w', 'release.yml',
		'BoardReadyOps release', '{NULL}')`, []int64{push}).Scan(&created); err != nil || created == nil {
		t.Errorf("the push alone: run %v (%v), want one", created, err)
	}
}

// TestPushBatchPlannedOnce: the set-based run creation (migration 00056) reads about its own rows
// after the inbox, the jobs, the repositories and the runs have grown, however small they were
// when the connection first ran it (its generic plan is kept: TestBatchCompletionPlannedPerCall's
// settings).
func TestPushBatchPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	tables := []string{"webhook_inbox", "control_plane_jobs", "repositories", "release_runs", "execution_attempts", "control_plane_outbox",
		"repository_release_settings", "installation_release_settings"}
	for _, table := range tables {
		if _, err := pool.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization')`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	type querier interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}
	// repositories records repositories from..to of installation 1.
	repositories := func(from, to int) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO repositories (id, installation_id, full_name)
			SELECT g, 1, 'org-1/repo-' || g FROM generate_series($1::int, $2) g`, from, to); err != nil {
			t.Fatal(err)
		}
	}
	// pushes delivers tag pushes v<from>..v<to>, one per repository of 1..repos, and claims them.
	pushes := func(q querier, from, to, repos int) []int64 {
		t.Helper()
		if _, err := q.Exec(ctx, `SELECT boardreadyops_webhook_accept('d-' || g, 'push', NULL, 1, 1 + g % $3,
				jsonb_build_object('push', jsonb_build_object('ref', 'refs/tags/v' || g, 'after', repeat('a', 40))),
				sha256(convert_to('d-' || g, 'UTF8')), NULL)
			FROM generate_series($1::int, $2) g`, from, to, repos); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for len(ids) < to-from+1 {
			rows, err := q.Query(ctx, `SELECT id FROM boardreadyops_job_claim('w', $1, '1 hour')`, min(1000, to-from+1-len(ids)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(got) == 0 {
				t.Fatalf("claimed %d jobs (%v)", len(got), err)
			}
			ids = append(ids, got...)
		}
		return ids
	}
	create := func(q querier, ids []int64) {
		t.Helper()
		rows, err := q.Query(ctx, `SELECT release_run_id FROM boardreadyops_release_run_create_from_push_batch($1, 'w', 'release.yml',
			'BoardReadyOps release', array_fill(NULL::text, ARRAY[cardinality($1::bigint[])]))`, ids)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := pgx.CollectRows(rows, pgx.RowTo[*string])
		if err != nil || len(runs) != len(ids) {
			t.Fatalf("%d rows for %d jobs (%v)", len(runs), len(ids), err)
		}
		for _, r := range runs {
			if r == nil {
				t.Fatalf("a push created no run: %v", runs)
			}
		}
	}
	// The connection's first call meets empty tables, then ten batches while they are a page or two.
	create(conn, []int64{})
	repositories(1, 8)
	for i := range 10 {
		create(conn, pushes(conn, 1+8*i, 8+8*i, 8))
	}
	// Then 5,000 repositories and 5,000 runs.
	repositories(9, 5000)
	for i := range 5 {
		create(conn, pushes(conn, 100+1000*i, 1099+1000*i, 5000))
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	read := map[string]int{}
	for i := range 5 {
		ids := pushes(tx, 10000+8*i, 10007+8*i, 5000)
		before := map[string]int{}
		for _, table := range tables {
			before[table] = rowsRead(t, tx, table)
		}
		create(tx, ids)
		for _, table := range tables {
			read[table] += rowsRead(t, tx, table) - before[table]
		}
	}
	for _, table := range tables {
		t.Logf("%d rows of %s", read[table], table)
		// Each run's rows a few times: the job's lock and check, the delivery, the repository,
		// the foreign-key checks.
		if most := 5 * 8 * 6; read[table] > most {
			t.Errorf("5 batches of 8 pushes read %d rows of %s (5,000 repositories, 5,080 runs), want at most %d", read[table], table, most)
		}
	}
}
